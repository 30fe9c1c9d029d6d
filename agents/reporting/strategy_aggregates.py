"""Strategies, not only runs, in TensorBoard: the mean over seeds with a band.

``tensorboard --logdir runs/<env>`` shows one line per run. To show which *strategy* is
ahead, :func:`write_strategy_aggregates` adds one TensorBoard run per strategy,
``<env_dir>/compare/<strategy>/``, holding at every step that all of the strategy's seeds
have reached (seeds that stopped early limit the steps)::

    strategy/eval_return          mean over seeds of eval/mean_return (the paper's metric)
    strategy/eval_return_lower    lower end of the band
    strategy/eval_return_upper    upper end of the band
    strategy/sigma_mean[_lower|_upper]   the same for explore/sigma_mean

The band (``band``) is either ``ci``, the 95 % interval of the mean over seeds from
rliable's stratified bootstrap at each step (:func:`agents.reporting.intervals.mean_band`;
the default of ``compare_runs`` and of every grid), or ``se``, ± one standard error (std
over seeds, ddof 1, / √seeds). Each aggregate run also holds the text ``strategy/band``
saying which. The comparison layout (TensorBoard's *Custom Scalars* tab) draws each triple
as a margin chart: every strategy's mean as a line with its band, the paper's Figure 5
inside TensorBoard. The evaluation curve comes from each run's ``eval.csv``, σ from its
event files (read with TensorBoard's own event reader). Writing again replaces a
strategy's aggregate events, so no step appears twice.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from torch.utils.tensorboard import SummaryWriter

from ..runs.run_logger import write_comparison_layout
from .curves import Curve, aligned_curve, stderr
from .run_files import load_runs

#: Sub-directory of an env directory holding the per-strategy aggregate runs.
AGGREGATE_DIR = "compare"
BANDS = ("ci", "se")
#: Replicates and seed of the ``ci`` band's bootstrap: a band to look at, drawn at every
#: step of every strategy at the end of each grid, so fewer than ``compare_runs``' tables.
BAND_REPS = 2000
BAND_SEED = 0


def _sigma_curve(strategy_dir: Path) -> Curve | None:
    """explore/sigma_mean of every seed, as TensorBoard reads it, on common steps."""
    per_seed = []
    for run_dir in sorted(strategy_dir.glob("seed*")):
        accumulator = EventAccumulator(str(run_dir), size_guidance={"scalars": 0})
        accumulator.Reload()
        if "explore/sigma_mean" in accumulator.Tags()["scalars"]:
            events = accumulator.Scalars("explore/sigma_mean")
            per_seed.append({event.step: event.value for event in events})
    return aligned_curve(strategy_dir.name, per_seed)


def band(values: np.ndarray, kind: str, reps: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(lower, upper) at each step of ``values`` (seeds, steps)."""
    if kind == "se":
        mean, se = values.mean(axis=0), stderr(values)
        return mean - se, mean + se
    from .intervals import mean_band  # imports rliable: ~seconds, only when asked for

    return mean_band(values, reps, seed)


def _describe(kind: str, reps: int, seed: int) -> str:
    if kind == "se":
        return "mean over seeds ± one standard error (std over seeds, ddof 1, / √seeds)"
    return (
        "mean over seeds and its 95 % interval: rliable's stratified bootstrap of the mean "
        f"at each step, percentile, {reps} replicates, bootstrap seed {seed}"
    )


def _write(writer: SummaryWriter, name: str, curve: Curve, kind: str, reps: int, seed: int):
    mean = curve.mean
    lower, upper = band(curve.returns, kind, reps, seed)
    for i, step in enumerate(curve.steps):
        writer.add_scalar(f"strategy/{name}", mean[i], int(step))
        writer.add_scalar(f"strategy/{name}_lower", lower[i], int(step))
        writer.add_scalar(f"strategy/{name}_upper", upper[i], int(step))


def write_strategy_aggregates(
    env_dir: str | Path, band_kind: str = "ci", reps: int = BAND_REPS, seed: int = BAND_SEED
) -> list[str]:
    """(Re)write ``<env_dir>/compare/<strategy>/`` for every strategy with results, and the
    layout that charts them; returns the strategies written."""
    if band_kind not in BANDS:
        raise ValueError(f"band must be one of {', '.join(BANDS)}, got {band_kind!r}")
    env_dir = Path(env_dir)
    written = []
    curves, _ = load_runs(env_dir)
    for curve in curves:
        out = env_dir / AGGREGATE_DIR / curve.strategy
        out.mkdir(parents=True, exist_ok=True)
        for path in out.glob("events.out.tfevents.*"):
            path.unlink()  # replace, never append: no step twice
        with SummaryWriter(str(out)) as writer:
            writer.add_text("strategy/band", _describe(band_kind, reps, seed), 0)
            _write(writer, "eval_return", curve, band_kind, reps, seed)
            sigma = _sigma_curve(env_dir / curve.strategy)
            if sigma is not None:
                _write(writer, "sigma_mean", sigma, band_kind, reps, seed)
        written.append(curve.strategy)
    if written:
        write_comparison_layout(env_dir, replace=True)
    return written

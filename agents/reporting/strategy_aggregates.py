"""Strategies, not only runs, in TensorBoard: mean ± standard error over seeds.

``tensorboard --logdir runs/<env>`` shows one line per run. To show which *strategy* is
ahead, :func:`write_strategy_aggregates` adds one TensorBoard run per strategy,
``<env_dir>/compare/<strategy>/``, holding at every step that all of the strategy's seeds
have reached (seeds that stopped early limit the steps)::

    strategy/eval_return          mean over seeds of eval/mean_return (the paper's metric)
    strategy/eval_return_lower    mean − standard error (std over seeds, ddof 1, / √seeds)
    strategy/eval_return_upper    mean + standard error
    strategy/sigma_mean[_lower|_upper]   the same for explore/sigma_mean

The comparison layout (:data:`COMPARISON_LAYOUT`, TensorBoard's *Custom Scalars* tab)
draws each triple as a margin chart: every strategy's mean as a line with its band, the
paper's Figure 5 inside TensorBoard. The evaluation curve comes from each run's
``eval.csv``, σ from its event files (read with TensorBoard's own event reader). Writing
again replaces a strategy's aggregate events, so no step appears twice. ``compare_runs``
writes them, and so does every grid when it ends.
"""

from __future__ import annotations

from pathlib import Path

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from torch.utils.tensorboard import SummaryWriter

from ..runs.run_logger import write_comparison_layout
from .curves import Curve, aligned_curve, load_curves

#: Sub-directory of an env directory holding the per-strategy aggregate runs.
AGGREGATE_DIR = "compare"


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


def _write(writer: SummaryWriter, name: str, curve: Curve) -> None:
    mean, se = curve.mean, curve.stderr
    for i, step in enumerate(curve.steps):
        writer.add_scalar(f"strategy/{name}", mean[i], int(step))
        writer.add_scalar(f"strategy/{name}_lower", mean[i] - se[i], int(step))
        writer.add_scalar(f"strategy/{name}_upper", mean[i] + se[i], int(step))


def write_strategy_aggregates(env_dir: str | Path) -> list[str]:
    """(Re)write ``<env_dir>/compare/<strategy>/`` for every strategy with results, and the
    layout that charts them; returns the strategies written."""
    env_dir = Path(env_dir)
    written = []
    for curve in load_curves(env_dir):
        out = env_dir / AGGREGATE_DIR / curve.strategy
        out.mkdir(parents=True, exist_ok=True)
        for path in out.glob("events.out.tfevents.*"):
            path.unlink()  # replace, never append: no step twice
        with SummaryWriter(str(out)) as writer:
            _write(writer, "eval_return", curve)
            sigma = _sigma_curve(env_dir / curve.strategy)
            if sigma is not None:
                _write(writer, "sigma_mean", sigma)
        written.append(curve.strategy)
    if written:
        write_comparison_layout(env_dir, replace=True)
    return written

"""Strategies, not only runs, in TensorBoard: the mean over seeds with a band, each named.

``tensorboard --logdir runs/<env>`` shows one line per run. To show which *strategy* is
ahead, :func:`write_strategy_aggregates` adds one TensorBoard run per strategy,
``<env_dir>/compare/<strategy>/``, holding at every step that all of the strategy's seeds
have reached (seeds that stopped early limit the steps)::

    strategy/eval_return                     mean over seeds of eval/mean_return (the
                                             paper's metric)
    strategy/sigma_mean                      the same for explore/sigma_mean, as is
    strategy/sigma_change                    σ's change since its first record, in %
    strategy_band/<strategy>/eval_return[_lower|_upper]
    strategy_band/<strategy>/sigma_change[_lower|_upper]
                                             the mean again and its band, under the
                                             strategy's name

The means share their tags across strategies, so TensorBoard's *Scalars* and *Time Series*
tabs draw one chart of every strategy's mean each (``strategy``: three charts), and the
bands, which would overlap there, are a group of their own (``strategy_band``). TensorBoard
on ``compare/`` alone (:func:`tensorboard_view`, what a grid prints) therefore opens on one
chart of every strategy's mean return, one run and one colour per strategy, nothing else
before it; a grid writes them as its runs evaluate (:mod:`.live_aggregates`).

The band (``band``) is either ``ci``, the 95 % interval of the mean over seeds from
rliable's stratified bootstrap at each step (:func:`agents.reporting.intervals.mean_band`;
the default of ``compare_runs`` and of every grid), or ``se``, ± one standard error (std
over seeds, ddof 1, / √seeds); the text ``strategy/band`` of each aggregate run says it
in full. The evaluation curve comes from each run's ``eval.csv``, σ from its event files
(read with TensorBoard's own event reader). Writing again replaces a strategy's aggregate
events, so no step appears twice.

The *Custom Scalars* layout (:func:`comparison_layout`) is built for the strategies found,
because TensorBoard draws no legend: a chart can name only what its title says, and its
colours follow runs. Each category holds one chart of all strategies' means, lines only
(the runs ``compare/<strategy>`` name them in the tooltip), then one chart per strategy
with its band, whose title names it, its seeds and σ₀; every title says which band it is.
Ten bands over each other hid each other, and TensorBoard's palette has seven colours, so
past seven strategies two share one: a line's strategy is its tooltip's, a band's its
chart's title. A chart selects tags, not runs, hence each strategy's band under its own
name; one margin chart of every strategy's named tags would be flagged by TensorBoard as
"Missing Tags" in each run (a run holds its own strategy's only).

σ is charted as its relative change, not as is: weight-noise σ often moves by less than
the 3 significant digits TensorBoard's axis prints (Vadam at c = 1e4: 0.01 to 0.009999),
so a σ chart reads "1e-2 1e-2 1e-2"; a log scale has the same problem. The change since
the first record starts at 0 and its ticks are multiples of one step, so they differ for
any change, and strategies whose σ₀ differ tenfold share one axis. Each strategy's own
chart title holds σ₀ itself, and ``sigma_mean`` keeps σ as is (the *Scalars* tab).
Strategies without weight noise have no σ (their runs log none; older runs' σ = 0 lines
are left out too).

Colours: TensorBoard colours runs, and gives ``compare/vadam`` and ``vadam/seed0`` each
their own unless told to group them: :data:`COLOUR_BY_STRATEGY` is the query string that
colours every run by its strategy in the *Time Series* tab. Smoothing: TensorBoard smooths
every line by 0.6 unless told otherwise, and a mean over seeds is smoothed already;
:data:`UNSMOOTHED` (*Time Series*) and :data:`UNSMOOTHED_LEGACY` (*Scalars*, *Custom
Scalars*) turn it off from the address.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from urllib.parse import quote

import numpy as np
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from torch.utils.tensorboard import SummaryWriter

from ..common.tags import EXPLORE_SIGMA_MEAN, sigma_text
from ..runs.run_logger import RUNS_LAYOUT, Chart, Layout, write_comparison_layout
from .curves import Curve, aligned_curve, stderr
from .run_files import load_runs

#: Sub-directory of an env directory holding the per-strategy aggregate runs.
AGGREGATE_DIR = "compare"
BANDS = ("ci", "se")
#: The band as chart titles name it.
BAND_TITLES = {"ci": "band: 95 % bootstrap CI", "se": "band: ± 1 s.e."}
#: Replicates and seed of the ``ci`` band's bootstrap: a band to look at, drawn at every
#: step of every strategy at the end of each grid, so fewer than ``compare_runs``' tables.
BAND_REPS = 2000
BAND_SEED = 0
#: TensorBoard's colour grouping by a regular expression's capture group: a strategy's
#: seeds (``<strategy>/seed<k>``) and its aggregate (``compare/<strategy>``) in one colour.
STRATEGY_REGEX = rf"(?:{AGGREGATE_DIR}/)?([^/]+)(?:/seed\d+)?$"
COLOUR_BY_STRATEGY = "runColorGroup=" + quote("regex:" + STRATEGY_REGEX, safe="")
#: No smoothing, as the *Time Series* tab's query string and the older tabs' hash say it.
UNSMOOTHED = "smoothing=0"
UNSMOOTHED_LEGACY = "_smoothingWeight=0"
#: Events a writer keeps before it flushes, and its seconds between flushes: more than an
#: aggregate holds and takes, so that its file is written at once as it closes.
ONE_FLUSH = {"max_queue": 10**6, "flush_secs": 3600}
#: The tag group of each strategy's own band (``strategy_band/<strategy>/eval_return``).
BAND_GROUP = "strategy_band"


#: TensorBoard's address on this machine, as ``tensorboard`` serves it by default.
TENSORBOARD_URL = "http://localhost:6006/"


def tensorboard_view(env_dir: str | Path) -> str:
    """The command, and the address, whose first view answers which strategy is ahead:
    TensorBoard on the aggregates alone (one run per strategy), unsmoothed."""
    logdir = shlex.quote(str(Path(env_dir) / AGGREGATE_DIR))
    return f"tensorboard --logdir {logdir}, then {TENSORBOARD_URL}?{UNSMOOTHED}#timeseries"


def mean_tag(series: str) -> str:
    """The tag of a series' mean over seeds, shared by every strategy's aggregate run."""
    return f"strategy/{series}"


def band_tags(series: str, strategy: str) -> tuple[str, str, str]:
    """(value, lower, upper) tags of one strategy's series with its band, under its name."""
    base = f"{BAND_GROUP}/{strategy}/{series}"
    return base, f"{base}_lower", f"{base}_upper"


def _sigma_curve(strategy_dir: Path) -> Curve | None:
    """explore/sigma_mean of every seed, as TensorBoard reads it, on common steps; None
    when the strategy has no weight noise (no σ, or σ = 0 in runs of earlier versions)."""
    per_seed = []
    for run_dir in sorted(strategy_dir.glob("seed*")):
        accumulator = EventAccumulator(str(run_dir), size_guidance={"scalars": 0})
        accumulator.Reload()
        if EXPLORE_SIGMA_MEAN in accumulator.Tags()["scalars"]:
            events = accumulator.Scalars(EXPLORE_SIGMA_MEAN)
            per_seed.append({event.step: event.value for event in events})
    curve = aligned_curve(strategy_dir.name, per_seed)
    if curve is None or not (curve.returns[:, 0] > 0).all():
        return None
    return curve


def relative_change(curve: Curve) -> Curve:
    """Each seed's values as % change since its first one: 100 (v_t / v_0 − 1)."""
    change = 100.0 * (curve.returns / curve.returns[:, :1] - 1.0)
    return Curve(curve.strategy, curve.steps, change, curve.label, curve.env)


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


def _write(writer: SummaryWriter, tags: tuple[str, ...], steps: np.ndarray, series: tuple) -> None:
    """Each of ``series`` (mean[, lower, upper]) at each step under its tag of ``tags``."""
    for i, step in enumerate(steps):
        for tag, values in zip(tags, series):
            writer.add_scalar(tag, values[i], int(step))


def comparison_layout(returns: list[Curve], sigmas: dict[str, Curve], band_kind: str) -> Layout:
    """The *Custom Scalars* tab for these strategies: eval return, then σ's change (the
    strategies with weight noise), each as all strategies' means together (lines only: a
    multiline chart, first) and one chart with its band each (margin charts, which
    TensorBoard shows in the reverse of their order here, so they are listed reversed);
    then every run's own curves."""
    band = BAND_TITLES[band_kind]
    hover = "the tooltip names each line's strategy"
    eval_charts: list[Chart] = [
        (f"eval return, all {len(returns)} strategies: mean over seeds ({hover}; each "
         f"one's {band.removeprefix('band: ')} band in its own chart)",
         [f"^{mean_tag('eval_return')}$"]),
        *((f"{c.strategy}: eval return, mean of {c.seeds} seeds, {band}",
           [band_tags("eval_return", c.strategy)]) for c in returns[::-1]),
    ]  # fmt: skip
    layout: Layout = {f"Compare strategies: eval return ({band})": eval_charts}
    if sigmas:
        sigma_charts: list[Chart] = [
            (f"σ's change in %, all {len(sigmas)} strategies with weight noise: mean over "
             f"seeds ({hover}; each one's band in its own chart)",
             [f"^{mean_tag('sigma_change')}$"]),
            *((f"{s}: σ's change in % from σ₀ = {sigma_text(c.mean[0])} (step {c.steps[0]}), "
               f"mean of {c.seeds} seeds, {band}", [band_tags("sigma_change", s)])
              for s, c in reversed(sigmas.items())),
        ]  # fmt: skip
        layout[f"Compare strategies: σ's change since its first record ({band})"] = sigma_charts
    return {**layout, **RUNS_LAYOUT}


def write_strategy_aggregates(
    env_dir: str | Path,
    band_kind: str = "ci",
    reps: int = BAND_REPS,
    seed: int = BAND_SEED,
    skipped: list[str] | None = None,
    sigma: bool = True,
) -> list[str]:
    """(Re)write ``<env_dir>/compare/<strategy>/`` for every strategy with results, and the
    layout that charts them; returns the strategies written. With a ``skipped`` list (a
    grid's end), runs whose files cannot be read are left out and named in it, once each;
    without, such a run stops the writing (:class:`~.run_files.RunFileError`). Without
    ``sigma``, the evaluation curve only (a grid's running runs: σ is read from every seed's
    event files, which grow all run long)."""
    if band_kind not in BANDS:
        raise ValueError(f"band must be one of {', '.join(BANDS)}, got {band_kind!r}")
    env_dir = Path(env_dir)
    curves, _ = load_runs(env_dir, skipped=skipped)
    sigmas: dict[str, Curve] = {}
    for curve in curves:
        out = env_dir / AGGREGATE_DIR / curve.strategy
        out.mkdir(parents=True, exist_ok=True)
        # Replaced, never appended (no step twice). The new file is written in one flush as
        # it closes, and the old one goes after it: a TensorBoard reading the directory (a
        # grid's running means) finds the whole of one of them at any moment.
        replaced = list(out.glob("events.out.tfevents.*"))
        with SummaryWriter(str(out), **ONE_FLUSH) as writer:
            writer.add_text("strategy/band", _describe(band_kind, reps, seed), 0)
            series = [("eval_return", curve)]
            sigma_curve = _sigma_curve(env_dir / curve.strategy) if sigma else None
            if sigma_curve is not None:
                sigmas[curve.strategy] = sigma_curve
                series += [
                    ("sigma_mean", sigma_curve),
                    ("sigma_change", relative_change(sigma_curve)),
                ]
            for name, values in series:
                _write(writer, (mean_tag(name),), values.steps, (values.mean,))
                if name != "sigma_mean":  # σ as is: its mean only (its change has the band)
                    lower, upper = band(values.returns, band_kind, reps, seed)
                    tags = band_tags(name, curve.strategy)
                    _write(writer, tags, values.steps, (values.mean, lower, upper))
        for path in replaced:
            path.unlink()
    if curves:
        write_comparison_layout(env_dir, comparison_layout(curves, sigmas, band_kind), replace=True)
    return [curve.strategy for curve in curves]

"""Published curves to compare against, shipped with the package (``agents/reporting/data``).

``khan2018`` is every test point of Khan et al. (2018), Appendix K, HalfCheetah-v1, six
strategies × 5 seeds, from the result files released with the authors' code, which hold
*two* runs of the same code and seeds (``docs/decisions.md#published-curves``): run 1 is
the paper's figure, run 2 the same program run again. A reference is read as run 1, run 2
or their pool of 10 seeds. Its tests ran after 1 k, 11 k, 21 k, … steps.
"""

from __future__ import annotations

import csv
from collections import defaultdict
from dataclasses import dataclass
from importlib import resources

import numpy as np

from .curves import Curve, aligned_curve


@dataclass(frozen=True)
class Reference:
    """A published data set: its file, how to cite it, and the tasks it belongs to."""

    filename: str
    citation: str
    #: Today's env ids the published task is drawn beside (same model, reward, episode).
    envs: tuple[str, ...]


REFERENCES = {
    "khan2018": Reference(
        "khan2018_halfcheetah_v1_curves.csv",
        "Khan et al. 2018, HalfCheetah-v1",
        ("HalfCheetah-v4", "HalfCheetah-v5"),
    ),
}

#: The runs a reference can be read as, in table order: ``1``, ``2`` and both pooled.
RUNS = ("1", "2", "pooled")
RUN_TITLES = {"1": "run 1", "2": "run 2", "pooled": "pooled 10"}


def parse_reference(text: str) -> tuple[str, tuple[str, ...]]:
    """``khan2018`` → every run; ``khan2018:1``, ``:2`` or ``:pooled`` → that one."""
    name, _, run = text.partition(":")
    if name not in REFERENCES:
        raise ValueError(f"unknown reference {name!r}; choose from {', '.join(REFERENCES)}")
    if not run:
        return name, RUNS
    if run not in RUNS:
        raise ValueError(f"{text!r}: the run is one of {', '.join(RUNS)} ({name}:1)")
    return name, (run,)


def load_reference(name: str, runs: tuple[str, ...] = RUNS) -> dict[str, dict[str, Curve]]:
    """The published curves of ``name``, by run (``1``, ``2``, ``pooled``) and strategy.

    ``pooled`` puts the seeds of runs 1 and 2 side by side: 10 rows per strategy.
    """
    reference = REFERENCES[name]
    by_run: dict[str, dict[str, dict[int, dict[int, float]]]] = defaultdict(
        lambda: defaultdict(lambda: defaultdict(dict))
    )
    data = resources.files("agents.reporting").joinpath("data", reference.filename)
    with data.open(newline="") as f:
        for row in csv.DictReader(f):
            seeds = by_run[row["run"]][row["strategy"]]
            seeds[int(row["seed"])][int(row["step"])] = float(row["mean_return"])
    curves: dict[str, dict[str, Curve]] = {}
    for run in runs:
        sources = ("1", "2") if run == "pooled" else (run,)
        strategies = sorted(set().union(*(by_run[r] for r in sources)))
        curves[run] = {}
        for strategy in strategies:
            per_seed = [
                seeds[s] for r in sources for seeds in [by_run[r][strategy]] for s in sorted(seeds)
            ]
            curve = aligned_curve(strategy, per_seed, reference.citation)
            if curve is not None:
                curves[run][strategy] = curve
    return curves


def reference_span(curve: Curve, reference: Curve) -> Curve:
    """The published curve between the published steps nearest the measured ends."""
    first = reference.nearest_step(int(curve.steps[0]))
    last = reference.nearest_step(int(curve.steps[-1]))
    return reference.between(first, last)


def published_column(reference: Curve, step: int) -> tuple[int, np.ndarray]:
    """(the published step nearest ``step``, the per-seed published returns there)."""
    published = reference.nearest_step(step)
    return published, reference.returns[:, np.flatnonzero(reference.steps == published)[0]]

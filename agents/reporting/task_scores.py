"""The tasks of a comparison and their scores: what is compared, in which unit, and how
scores of different tasks are put on one scale.

A task is an env. Its curves (one per strategy, or per strategy and set of runs) give two
scores per run, compared at a common step (:attr:`Task.end`): the **final** score (at
the last step every seed of every curve of the task reached) and the score **over the
curve** (its average over the evaluation steps up to there, the trapezoid area divided by
the span, as the AUC column). A method trained longer is thus not ranked above one
trained less for its extra steps: P(X > Y) between runs of 200 k and of 100 k steps
would measure the training's length, not the strategy. The unit is the evaluation's
success rate for tasks whose ``eval.csv`` records one (``success_rate`` in [0, 1]), else
the test return.

Across tasks, scores are normalised (``docs/decisions.md#normalisation``): a success rate
is already in [0, 1]; a return R becomes (R − R_random) / (R_reference − R_random) with
the env's random-policy and reference returns of ``data/reference_returns.csv`` (D4RL's
reference returns, Fu et al. 2020: 0 is a random policy, 1 an expert one).
"""

from __future__ import annotations

import csv
from dataclasses import dataclass, field
from importlib import resources

import numpy as np

from ..common.errors import ConfigError
from .curves import Curve

REFERENCE_RETURNS = "reference_returns.csv"
#: The two scores of a run, with how tables name them.
SCORES = {"final": "final", "auc": "over the curve"}
#: The unit of a task scored by success rate (a sparse task), in [0, 1].
SUCCESS_UNIT = "success rate"


@dataclass(frozen=True)
class Normalisation:
    """score ↦ (score − low) / (high − low), and where low and high come from."""

    low: float
    high: float
    source: str

    def __call__(self, scores: np.ndarray) -> np.ndarray:
        return (scores - self.low) / (self.high - self.low)

    def formula(self, unit: str = "return") -> str:
        shift = f"+ {-self.low:g}" if self.low < 0 else f"− {self.low:g}"
        return f"({unit} {shift}) / ({self.high:g} {shift})"


SUCCESS_RATE = Normalisation(0.0, 1.0, "success rate, already in [0, 1]")


def reference_returns() -> dict[str, Normalisation]:
    """Random-policy and reference return per env id (package data)."""
    data = resources.files("agents.reporting").joinpath("data", REFERENCE_RETURNS)
    with data.open(newline="") as f:
        return {
            row["env"]: Normalisation(
                float(row["random_return"]), float(row["reference_return"]), row["source"]
            )
            for row in csv.DictReader(f)
        }


@dataclass
class Task:
    """One env's curves."""

    env: str
    curves: list[Curve] = field(default_factory=list)

    @property
    def sparse(self) -> bool:
        """Scored by success rate: every curve records one."""
        return all(curve.success is not None for curve in self.curves)

    @property
    def unit(self) -> str:
        return SUCCESS_UNIT if self.sparse else "return"

    @property
    def end(self) -> int | None:
        """The step the scores are taken at: the last that every curve reached; None when
        some curve's first evaluation comes after another's last (no common span: each
        is then scored at its own last step)."""
        end = min(int(curve.steps[-1]) for curve in self.curves)
        return end if all(curve.steps[0] <= end for curve in self.curves) else None

    def compared(self, curve: Curve) -> Curve:
        """``curve`` up to :attr:`end`, the part its scores come from."""
        end = self.end
        if end is None or curve.steps[-1] <= end:
            return curve
        return curve.between(int(curve.steps[0]), end)

    def scores(self, score: str) -> dict[str, np.ndarray]:
        """Per method, the ``score`` (``final`` or ``auc``) of each run, up to :attr:`end`."""
        result = {}
        for curve in map(self.compared, self.curves):
            values = curve.success if self.sparse else curve.returns
            result[curve.name] = values[:, -1] if score == "final" else curve.auc_per_seed(values)
        return result

    def normalisation(self) -> Normalisation | None:
        if self.sparse:
            return SUCCESS_RATE
        return reference_returns().get(self.env)


def group_tasks(curves: list[Curve]) -> list[Task]:
    """Curves by env, in order of appearance; one name per method within a task."""
    tasks: dict[str, Task] = {}
    for curve in curves:
        task = tasks.setdefault(curve.env or "?", Task(curve.env or "?"))
        if any(other.name == curve.name for other in task.curves):
            raise ConfigError(
                f"two sets of runs of {curve.name} on {task.env}: tell them apart with --labels"
            )
        task.curves.append(curve)
    return list(tasks.values())


@dataclass
class Across:
    """Scores of several tasks on one scale: per method a (runs, tasks) array."""

    tasks: list[str]
    scores: dict[str, np.ndarray]
    normalised: bool
    description: str
    notes: list[str]


def across_tasks(tasks: list[Task], score: str) -> Across | None:
    """Normalised ``score`` of every method present in every normalisable task.

    One task without a normalisation is compared on its own unit (raw); several tasks
    need one each, tasks without are left out with a note. A method with fewer runs on
    one task than on another keeps its first runs on each (rliable needs one run count
    per method), with a note.
    """
    notes: list[str] = []
    usable = [(task, task.normalisation()) for task in tasks]
    if len(tasks) == 1 and usable[0][1] is None:
        task = tasks[0]
        scores = {name: values[:, None] for name, values in task.scores(score).items()}
        description = f"{task.unit} of {task.env}, not normalised (no reference return known)"
        return Across([task.env], scores, False, description, notes)
    for task, normalisation in usable:
        if normalisation is None:
            notes.append(f"{task.env} left out: no reference return known to normalise it")
    usable = [(task, n) for task, n in usable if n is not None]
    if not usable:
        return None
    per_task = [(task, n, task.scores(score)) for task, n in usable]
    names = [name for name in per_task[0][2] if all(name in s for _, _, s in per_task)]
    for _, _, task_scores in per_task:
        for name in task_scores:
            if name not in names:
                notes.append(f"{name} left out: it has no runs on every task")
    scores = {}
    for name in names:
        runs = min(len(s[name]) for _, _, s in per_task)
        if any(len(s[name]) != runs for _, _, s in per_task):
            notes.append(f"{name}: the first {runs} runs of each task (tasks differ in runs)")
        scores[name] = np.stack([n(s[name][:runs]) for _, n, s in per_task], axis=1)
    description = "; ".join(
        f"{task.env}: {n.source}" if task.sparse else f"{task.env}: {n.formula()}, {n.source}"
        for task, n in usable
    )
    return Across([task.env for task, _ in usable], scores, True, description, notes)

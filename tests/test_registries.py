"""A new strategy is its module, one registry entry and its preset; a new posterior and a new
bonus are each their module and one registry entry (docs/architecture.md, "Adding a
strategy, a posterior or a bonus").

This module is all three: ``ToyNoise`` (SGD on μ, weight noise of a fixed σ), ``ToyPosterior``
(a fixed-σ Gaussian whose mean takes SGD steps, VIME's dynamics model's posterior) and
``CountBonus`` (a bonus of scale/√n after n transitions) are defined here, registered with one
entry each (and the strategy's preset in a folder of presets), and trained end to end by
``train_agent`` — the native DDPG eager and compiled, resumed, TRPO with the bonus, and VIME
with the toy posterior — with nothing else of the project changed.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, NamedTuple

import numpy as np
import pytest
import torch
import yaml
from gymnasium import spaces
from torch import Tensor

import param_explore
from agents.curiosity.registry import BONUSES, BonusKind
from agents.settings import files
from param_explore.posterior import GainEvidence, Posterior
from param_explore.sampling import Mode, PrecisionSampling
from param_explore.traceable import StateTensors
from param_explore.validation import Checks, require_positive

pytestmark = pytest.mark.trains


# --------------------------------------------------------------------------- a strategy
class ToyCoefficients(NamedTuple):
    lr: float


class ToyNoise(PrecisionSampling, torch.optim.Optimizer):
    """SGD on μ; θ = μ + σ ε with σ = 1/√precision fixed at ``1/initial_precision``."""

    def __init__(
        self,
        params: Iterable[Tensor] | Iterable[dict],
        lr: float = 1e-3,
        initial_precision: float = 400.0,
    ) -> None:
        super().__init__(params, self.checked_settings(lr=lr, initial_precision=initial_precision))

    _setting_checks: ClassVar[Checks] = dict(
        lr=require_positive, initial_precision=require_positive
    )
    _state_keys = ("precision",)

    def _coefficients(self, group: Mapping, step: int) -> ToyCoefficients:
        return ToyCoefficients(group["lr"])

    def _update(
        self,
        group: Mapping,
        xs: list[Tensor],
        grads: list[Tensor],
        state: StateTensors,
        c: ToyCoefficients,
        mode: Mode,
    ) -> None:
        if mode == "eager":
            torch._foreach_add_(xs, grads, alpha=-c.lr)
        else:
            for x, g in zip(xs, grads):
                x.sub_(c.lr * g)


class ToyPosterior(Posterior, ToyNoise):
    """A Gaussian N(μ, 1/precision) of fixed σ whose mean takes SGD steps: its gain is the KL
    of the mean's step on one example at the mean, ½ Σ precision (lr ∇μ)², its prior N(0, η)."""

    def __init__(
        self,
        params: Iterable[Tensor] | Iterable[dict],
        lr: float = 1e-3,
        initial_precision: float = 400.0,
        prior_variance: float = 1.0,
    ) -> None:
        torch.optim.Optimizer.__init__(  # ToyNoise's settings and the prior's
            self,
            params,
            self.checked_settings(
                lr=lr, initial_precision=initial_precision, prior_variance=prior_variance
            ),
        )

    _setting_checks: ClassVar[Checks] = dict(
        lr=require_positive, initial_precision=require_positive, prior_variance=require_positive
    )
    state_per_weight: ClassVar[int] = 2  # ε and the precision

    @classmethod
    def posterior_settings(cls, num_data: float, prior_variance: float) -> dict[str, Any]:
        return dict(lr=1e-2, initial_precision=4.0 / prior_variance, prior_variance=prior_variance)

    def kl_divergence_to_prior(self) -> float:
        return self._diagonal_kl_to_prior()

    def information_gain(self, evidence: GainEvidence, step_size: float = 0.01) -> Tensor:
        means, _ = evidence.moment_gradients()
        lr, total = self.param_groups[0]["lr"], 0
        for p, grad in zip(self._params(), means, strict=True):
            terms = (lr * grad).square() * self.state[p]["precision"]
            total = total + 0.5 * terms.flatten(start_dim=1).sum(1, dtype=torch.float64)
        return total


PRESET = {"strategy": "toy-noise", "optimizer_kwargs": {"lr": 1e-3, "initial_precision": 400.0}}


# --------------------------------------------------------------------------- a bonus
@dataclass(frozen=True)
class CountSettings:
    kind: str = "count"
    scale: float = 0.1

    def __post_init__(self) -> None:
        require_positive("scale", self.scale)

    def label(self) -> str:
        return self.kind

    def values(self) -> dict[str, Any]:
        return {"kind": self.kind, "scale": self.scale}

    def memory_needs(self, obs_dim: int, action_dim: int, batch_size: int = 1) -> list:
        return []  # a counter

    def require_fitted_within(self, total_steps: int, rollout: int | None) -> None:
        pass  # given from the first transition


class CountBonus:
    """scale/√n for every transition once n transitions were seen."""

    ready = True

    def __init__(self, settings: CountSettings) -> None:
        self.settings, self.count = settings, 0

    def add(self, obs: np.ndarray, actions: np.ndarray, next_obs: np.ndarray) -> None:
        self.count += len(np.atleast_2d(np.asarray(obs)))

    def due(self) -> bool:
        return False

    def fit(self) -> bool:
        return False

    def intrinsic_rewards(self, obs: Any, actions: Any, next_obs: Any) -> Tensor:
        rows = len(np.atleast_2d(np.asarray(obs)))
        return torch.full((rows,), self.settings.scale / math.sqrt(max(self.count, 1)))

    def pop_statistics(self) -> dict[str, float]:
        return {"bonus/count": float(self.count)}

    def state_dict(self, include_pool: bool = True) -> dict[str, Any]:
        return {"count": self.count}

    def load_state_dict(self, state: dict[str, Any], steps: int | None = None) -> None:
        self.count = state["count"]


def make_count_bonus(
    settings: CountSettings,
    observation_space: spaces.Space,
    action_space: spaces.Space,
    seed: int | None,
    device: torch.device | str = "cpu",
) -> CountBonus:
    return CountBonus(settings)


# --------------------------------------------------------------------------- registered
@pytest.fixture
def registered(tmp_path, monkeypatch) -> Path:
    """One entry each, and the strategy's preset in a folder of presets."""
    presets = tmp_path / "presets"
    presets.mkdir()
    (presets / "toy-noise.yaml").write_text(yaml.safe_dump(PRESET))
    monkeypatch.setitem(param_explore.OPTIMIZERS, "toy-noise", ToyNoise)
    monkeypatch.setitem(param_explore.POSTERIORS, "toy-posterior", ToyPosterior)
    monkeypatch.setitem(BONUSES, "count", BonusKind(CountSettings, make_count_bonus))
    monkeypatch.setattr(files, "PRESET_DIRS", [presets, *files.PRESET_DIRS])
    return tmp_path


SHORT = ["--env", "Pendulum-v1", "--eval-every", "200", "--eval-episodes", "1",
         "--set", "hidden_sizes=[16,16]", "--set", "log_every=200", "--no-progress"]  # fmt: skip


def scalars(run_dir: Path, tag: str) -> list[float]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(run_dir)).Reload()
    return [event.value for event in events.Scalars(tag)]


def test_a_toy_strategy_and_bonus_train_resume_and_report(registered, train_agent):
    args = [*SHORT, "--opt", "toy-noise", "--bonus", "count", "--set", "bonus.scale=0.5"]
    result = train_agent(*args, "--steps", "400", "--no-compile", cwd=registered)
    assert result.returncode == 0, result.stderr
    run_dir = registered / "runs" / "Pendulum-v1" / "toy-noise+count" / "seed0"
    config = yaml.safe_load((run_dir / "config.yaml").read_text())
    assert config["strategy"] == "toy-noise"
    assert config["optimizer_kwargs"] == {"lr": 1e-3, "initial_precision": 400.0}
    assert config["bonus"] == {"kind": "count", "scale": 0.5}
    # σ = 1/√400 on every weight, never learned; the bonus's own scalar in TensorBoard.
    assert scalars(run_dir, "explore/sigma_mean") == pytest.approx([0.05, 0.05], rel=1e-6)
    assert scalars(run_dir, "bonus/count")[-1] > 0

    resumed = train_agent(*args, "--steps", "600", "--resume", "--no-compile", cwd=registered)
    assert resumed.returncode == 0, resumed.stderr
    state = torch.load(run_dir / "checkpoints" / "latest.pt", weights_only=True)
    assert state["counters"]["num_timesteps"] == 600
    assert state["bonus"]["count"] == 600  # the bonus's own state, checkpointed and resumed


def test_a_toy_strategy_compiles_and_a_toy_bonus_rides_on_trpo(registered, train_agent):
    compiled = train_agent(*SHORT, "--opt", "toy-noise", "--steps", "200", cwd=registered)
    assert compiled.returncode == 0, compiled.stderr
    trpo = train_agent(
        "--env", "Pendulum-v1", "--engine", "sb3", "--algo", "trpo", "--bonus", "count",
        "--steps", "400", "--eval-every", "400", "--eval-episodes", "1", "--no-progress",
        "--set", "trpo.n_steps=200", "--set", "hidden_sizes=[16,16]", "--set", "log_every=200",
        cwd=registered,
    )  # fmt: skip
    assert trpo.returncode == 0, trpo.stderr
    run_dir = registered / "runs" / "Pendulum-v1" / "trpo+count-sb3" / "seed0"
    assert scalars(run_dir, "bonus/count")[-1] == 400  # every rollout scored and pooled


def test_an_unregistered_name_is_one_line(registered, train_agent):
    result = train_agent(*SHORT, "--opt", "toy-nois", "--steps", "10", cwd=registered)
    assert result.returncode == 2
    assert "unknown strategy toy-nois (did you mean toy-noise?)" in result.stderr


def test_a_toy_posterior_trains_as_vimes(registered, train_agent):
    """Registered, it is VIME's dynamics model's posterior: settings (its own, and the
    user's on top), memory budget, fits, information gains and the bonus, a checkpoint."""
    args = [*SHORT, "--opt", "adam-plain", "--bonus", "vime", "--no-compile",
            "--set", "bonus.posterior=toy-posterior", "--set", "bonus.hidden_sizes=[8]",
            "--set", "bonus.min_pool_size=100", "--set", "bonus.fit_every=100",
            "--set", "bonus.optimizer_kwargs={initial_precision: 16.0}"]  # fmt: skip
    result = train_agent(*args, "--steps", "400", cwd=registered)
    assert result.returncode == 0, result.stderr
    run_dir = registered / "runs" / "Pendulum-v1" / "adam-plain+vime-toy-posterior" / "seed0"
    config = yaml.safe_load((run_dir / "config.yaml").read_text())
    assert config["bonus"]["posterior"] == "toy-posterior"
    assert scalars(run_dir, "bonus/info_gain_median")[-1] > 0
    state = torch.load(run_dir / "checkpoints" / "latest.pt", weights_only=True)
    optimizer = state["bonus"]["dynamics"]["optimizer"]
    assert optimizer["param_groups"][0]["lr"] == 1e-2  # its posterior_settings'
    precisions = [s["precision"] for s in optimizer["state"].values()]
    assert all(bool((p == 16.0).all()) for p in precisions)  # the user's, on top

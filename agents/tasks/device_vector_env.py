"""What every vector env that steps on a torch device shares: N copies as tensors, a step that
never leaves the device, and the numpy contract of :mod:`agents.common.vector_envs` beside it.

Why: on a GPU, a population's step stays on the device only if its envs step there
(:mod:`agents.common.tensor_envs`, ``DeviceEnvs``). A device env keeps its copies' state as
(N, …) tensors on its device and has two faces:

* :meth:`DeviceVectorEnv.step_tensors` — torch in, torch out, all on the device: no copy and no
  host synchronisation (the autoreset draws start states for every row and keeps them where an
  episode ended, rather than asking the host which rows did);
* :meth:`DeviceVectorEnv.step` — the contract of :mod:`agents.common.vector_envs` for a user
  that consumes numpy: the actions go to the device (one host→device copy) and the step's
  results come back packed in one float64 tensor (one device→host copy; none on the CPU, where
  a tensor's ``.numpy()`` is a view), cast to the single env's dtypes and laid out as
  ``SyncVectorEnv`` lays out its infos.

This base owns the part every such task shares, once — seeding, the time limit, the autoreset,
the task's success and coverage report on the device (:class:`TensorReport`), both faces — as
:class:`agents.tasks.batched.BatchedEnv` owns it for the numpy tasks; a task gives its states'
arithmetic: :meth:`DeviceVectorEnv._start` (draw start states for every copy, keep them in the
masked ones), :meth:`DeviceVectorEnv._observe` and :meth:`DeviceVectorEnv._advance` (one step of
every copy: rewards, terminations, the step's info entries as tensors).

Randomness: one ``torch.Generator`` on the device, seeded at a seeded reset from the N seeds
(``np.random.SeedSequence(seeds)``), so the same seeds give the same start states on one
device; they are not a numpy task's draws.
"""

from __future__ import annotations

from typing import Any, ClassVar, NamedTuple

import gymnasium as gym
import numpy as np
import torch
from gymnasium.vector import AutoresetMode, VectorEnv

from .batched import BatchedReport, _infos, show_copies
from .report import Coverage


class TensorStep(NamedTuple):
    """One step of every copy, as tensors on the env's device."""

    #: (N, obs) the next observations: a new episode's first where one ended
    obs: torch.Tensor
    #: (N,) the rewards
    rewards: torch.Tensor
    #: (N,) bool
    terminated: torch.Tensor
    #: (N,) bool: the time limit reached
    truncated: torch.Tensor
    #: (N, obs) each row's observation before an autoreset: the finished episode's last where
    #: ``terminated | truncated``, equal to ``obs`` elsewhere
    final_obs: torch.Tensor
    #: the single env's info entries, (N,) each (``is_success`` where the task reports it)
    entries: dict[str, torch.Tensor]


class TensorReport(BatchedReport):
    """:class:`BatchedReport` with its arrays as tensors on ``device``: success and the
    coverage windows are kept where the step runs; :meth:`pop_coverage` (once a logging
    window) is one copy to the host."""

    _xp = torch

    def __init__(self, coverage: Coverage, num_envs: int, device: torch.device) -> None:
        self.coverage = coverage
        self.succeeded = torch.zeros(num_envs, dtype=torch.bool, device=device)
        self._recorded = torch.zeros(num_envs, dtype=torch.bool, device=device)
        self._window = {
            name: torch.full((num_envs,), float("nan"), dtype=torch.float64, device=device)
            for name in coverage.scalars
        }

    def start_episode(self, mask: torch.Tensor) -> None:
        self.succeeded &= ~mask

    @staticmethod
    def _float64(values: torch.Tensor) -> torch.Tensor:
        return values.to(torch.float64)

    @staticmethod
    def _copy(values: torch.Tensor) -> torch.Tensor:
        return values.clone()

    def _host_windows(self) -> tuple[np.ndarray, np.ndarray]:
        windows = torch.stack([*self._window.values(), self._recorded.to(torch.float64)])
        host = windows.cpu().numpy()
        return host[:-1], host[-1] > 0


class DeviceVectorEnv(VectorEnv):
    """N copies of ``single_env``'s task as tensors on ``device``; subclasses give its
    arithmetic (module docstring). ``single_env`` (made by ``gym.make``, with the run's
    settings) gives the spaces, the spec and the settings the subclass reads;
    ``max_episode_steps`` is its time limit."""

    metadata: ClassVar[dict[str, Any]] = {"autoreset_mode": AutoresetMode.SAME_STEP}
    #: the quantities and goal the task reports (None: it reports none)
    coverage: ClassVar[Coverage | None] = None
    #: the numpy dtype of each info entry of :meth:`_advance`: the single env's
    entry_dtypes: dict[str, Any]

    def __init__(
        self,
        single_env: gym.Env,
        num_envs: int,
        max_episode_steps: int | None,
        device: torch.device,
    ) -> None:
        show_copies(self, single_env, num_envs, max_episode_steps)
        self.device = torch.device(device)
        self.generator = torch.Generator(self.device)
        self._seed(None)
        self._elapsed = torch.zeros(num_envs, dtype=torch.int64, device=self.device)
        self._obs_dtype = self.single_observation_space.dtype
        self.report = (
            None if self.coverage is None else TensorReport(self.coverage, num_envs, self.device)
        )

    # ---------------------------------------------------------------- what a task gives
    def _start(self, mask: torch.Tensor) -> None:
        """Draw start states for every copy (one draw, no host sync) and set them in the
        copies of ``mask``."""
        raise NotImplementedError

    def _observe(self) -> torch.Tensor:
        """Every copy's observation, (N, …)."""
        raise NotImplementedError

    def _advance(
        self, actions: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
        """One step of every copy: rewards (N,), terminations (N,) and the step's info
        entries, each (N,) (a task's report included)."""
        raise NotImplementedError

    # --------------------------------------------------------------- the device path
    def reset_tensors(
        self, seed: int | list[int | None] | None = None, mask: torch.Tensor | None = None
    ) -> torch.Tensor:
        """Start the copies in ``mask`` (all when None); with ``seed`` (an int ``s`` means
        ``[s, s+1, …]``; None among the seeds takes fresh entropy) the generator is seeded
        first. Returns every copy's observation."""
        if seed is not None:
            seeds = [seed + i for i in range(self.num_envs)] if isinstance(seed, int) else seed
            if len(seeds) != self.num_envs:
                raise ValueError(f"{len(seeds)} seeds for {self.num_envs} envs")
            self._seed(None if any(s is None for s in seeds) else [int(s) for s in seeds])
        if mask is None:
            mask = torch.ones(self.num_envs, dtype=torch.bool, device=self.device)
        self._begin(mask)
        return self._observe()

    def step_tensors(self, actions: torch.Tensor) -> TensorStep:
        """One step of every copy from ``actions`` (N, act) on the device, the autoreset
        included; nothing leaves the device."""
        rewards, terminated, entries = self._advance(actions)
        self._elapsed += 1
        if self.max_episode_steps is None:
            truncated = torch.zeros_like(terminated)
        else:
            truncated = self._elapsed >= self.max_episode_steps
        final_obs = self._observe()
        done = terminated | truncated
        self._begin(done)
        obs = torch.where(done[:, None], self._observe(), final_obs)
        return TensorStep(obs, rewards, terminated, truncated, final_obs, entries)

    # ------------------------------------------------------------- the numpy contract
    def reset(
        self, *, seed: int | list[int | None] | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        mask = None
        if options and "reset_mask" in options:
            rows = np.asarray(options["reset_mask"])
            if rows.shape != (self.num_envs,) or rows.dtype != np.bool_ or not rows.any():
                raise ValueError(
                    f"reset_mask must be a ({self.num_envs},) bool array, not all False"
                )
            mask = torch.as_tensor(rows, device=self.device)
        obs = self.reset_tensors(seed, mask)
        return obs.cpu().numpy().astype(self._obs_dtype), {}

    def step(
        self, actions: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """:meth:`step_tensors` for numpy actions, with the contract's arrays and infos: the
        one host→device copy (the actions) and the one device→host copy (every result,
        packed in float64, which holds each of them exactly) of a step on a GPU."""
        actions = np.asarray(actions)
        if actions.shape != self.action_space.shape:
            raise ValueError(
                f"actions of shape {actions.shape}, expected {self.action_space.shape}"
            )
        step = self.step_tensors(torch.as_tensor(actions, device=self.device))
        columns = [step.obs, step.final_obs, step.rewards[:, None]]
        columns += [step.terminated[:, None], step.truncated[:, None]]
        columns += [value[:, None] for value in step.entries.values()]
        packed = torch.cat([column.to(torch.float64) for column in columns], dim=1)
        host = packed.cpu().numpy()  # the step's one device→host copy
        width = step.obs.shape[1]
        obs = host[:, :width].astype(self._obs_dtype)
        final = host[:, width : 2 * width].astype(self._obs_dtype)
        rewards = host[:, 2 * width].copy()
        terminated, truncated = host[:, 2 * width + 1] > 0, host[:, 2 * width + 2] > 0
        entries = {
            key: host[:, 2 * width + 3 + k].astype(self.entry_dtypes[key])
            for k, key in enumerate(step.entries)
        }
        done = terminated | truncated
        infos = _infos(entries, ~done)
        if np.count_nonzero(done):
            final_obs = np.full(self.num_envs, None, dtype=object)
            for i in np.flatnonzero(done):
                final_obs[i] = final[i]
            infos["final_obs"], infos["_final_obs"] = final_obs, done
            infos["final_info"], infos["_final_info"] = _infos(entries, done), done.copy()
        return obs, rewards, terminated, truncated, infos

    def pop_coverage(self) -> list[dict[str, float]]:
        """Each copy's coverage since the last call ({} per copy for a task that reports
        none); one copy to the host."""
        if self.report is None:
            return [{} for _ in range(self.num_envs)]
        return self.report.pop_coverage()

    # ------------------------------------------------------------------------ internals
    def _seed(self, entropy: list[int] | None) -> None:
        state = np.random.SeedSequence(entropy).generate_state(1, np.uint64)[0]
        self.generator.manual_seed(int(state))

    def _begin(self, mask: torch.Tensor) -> None:
        self._elapsed.masked_fill_(mask, 0)
        if self.report is not None:
            self.report.start_episode(mask)
        self._start(mask)

    @property
    def _f32(self) -> dict[str, Any]:
        return {"dtype": torch.float32, "device": self.device}

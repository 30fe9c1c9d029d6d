"""The envs as the engine sees them: every copy's step as tensors on the engine's device.

Why: the engine's step — acting, the action noise, the replay buffer's write, the observation
statistics, the draws, the update — runs where its tensors live. On a GPU every crossing
between host and device is a copy and a synchronisation, so the envs' answer must arrive as
tensors already on the device, and the host must see a step once: the rewards and flags its
bookkeeping and checks read (:class:`HostStep`).

Two implementations of one contract (:class:`TensorEnvs`), chosen by :func:`tensor_envs`:

* :class:`DeviceEnvs` — a vector env that steps on the device itself
  (:meth:`agents.tasks.device_vector_env.DeviceVectorEnv.step_tensors`: MuJoCo Warp's tasks,
  the mountain car as torch code): only the :class:`HostStep` crosses, one packed copy (with
  the episodes' success where the task reports it).
* :class:`HostEnvs` — a vector env of the numpy contract (:mod:`agents.common.vector_envs`:
  ``mujoco.batch``, the array tasks, a loop of gymnasium envs, a single run's
  :class:`~agents.common.vector_envs.OneEnv`): the actions cross to the host and the answer
  back. On a CPU these crossings share memory (``Tensor.numpy``, ``torch.from_numpy``); on a
  GPU each is one copy.

:attr:`crossings` counts the crossings each makes (the benchmark's transfers per step,
``benchmarks/device_step.py``): through the host two a step, on the device one (the
:class:`HostStep` copy) — or none, for a step the host does not read (``read=False``: a
population whose rows stay on the device between its boundaries,
:mod:`agents.ddpg.device_rows`). Both keep the rule that nothing non-finite reaches an env (a row
whose action is not finite steps with an action of its space, and says so), and both lay
out the step as SAME_STEP autoreset does, so the two give the same numbers for the same env
(``tests/test_tensor_envs.py``).
"""

from __future__ import annotations

import functools
from typing import NamedTuple, Protocol

import gymnasium as gym
import numpy as np
import torch
from torch import Tensor


class EnvStep(NamedTuple):
    """One step of every copy, as tensors on the engine's device."""

    #: (N, obs) the observations the next step acts on: a new episode's first where one ended
    obs: Tensor
    #: (N, obs) the transitions' s': an ended episode's last observation where one ended
    next_obs: Tensor
    #: (N,) the rewards
    rewards: Tensor
    #: (N,) bool
    terminated: Tensor
    #: the vector env's infos on the host (through :class:`HostEnvs`, all of them; through
    #: :class:`DeviceEnvs`, an ended episode's success in ``final_info`` where the task
    #: reports one, in the packed copy; none when the step is not read)
    infos: dict
    #: (N,) bool, the time limit reached; and whether each row's action, and its s' and
    #: reward, were finite — on the device, from :class:`DeviceEnvs` (None through the host,
    #: whose :class:`HostStep` holds them)
    truncated: Tensor | None = None
    finite_actions: Tensor | None = None
    finite: Tensor | None = None


class HostStep(NamedTuple):
    """What the host reads of a step (its bookkeeping, its checks), as numpy: one copy from
    a device, none when the envs step on the host."""

    #: (N,) float64
    rewards: np.ndarray
    #: (N,) bool
    terminated: np.ndarray
    #: (N,) bool: the time limit reached
    truncated: np.ndarray
    #: (N,) whether each row's action was finite (a row whose action was not stepped with an
    #: action of its space: nothing non-finite reaches an env)
    finite_actions: np.ndarray
    #: (N,) whether each row's s' and reward are finite
    finite: np.ndarray
    #: every row's action, s' and reward finite (the common answer: nothing to check row by
    #: row)
    all_finite: bool


class TensorEnvs(Protocol):
    """What the engine steps: ``num_envs`` copies, row k member k's, with SAME_STEP
    autoreset (an episode that ends is reset within the step that ends it)."""

    #: the vector env stepped (its spaces, its task report)
    envs: gym.vector.VectorEnv
    device: torch.device
    #: host↔device crossings so far (module docstring)
    crossings: int

    def reset(self, seeds: list[int | None]) -> Tensor:
        """Every copy reset (copy k from ``seeds[k]``; None: from its own RNG); the
        observations."""
        ...

    def step(
        self, actions: Tensor, stepping: np.ndarray | Tensor | None = None, read: bool = True
    ) -> tuple[EnvStep, HostStep | None]:
        """One step of every copy from ``actions`` (N, action dim) on the device; a row
        whose action is not finite, or not ``stepping`` (a stopped member's), steps with an
        action of its space (its env goes on). ``read=False``: the host does not read this
        step (no :class:`HostStep`, None; its flags stay on the device, in the
        :class:`EnvStep`), where the envs step on the device; through the host it is read
        anyway."""
        ...


#: Whether every element of an array is true: ``values.all()`` in NumPy's C alone
#: (``ndarray.all`` and ``any`` run a Python function of NumPy's, and a step checks a few
#: arrays of one row each for a single run, where that function is most of a check's cost).
every = functools.partial(np.logical_and.reduce, axis=None)
#: Whether some element of an array is true: ``values.any()`` in NumPy's C alone.
some = functools.partial(np.logical_or.reduce, axis=None)


def rest_action(envs: gym.vector.VectorEnv) -> np.ndarray:
    """The action a row steps with when it has none: 0, clipped into the space."""
    space = envs.single_action_space
    return np.clip(0.0, space.low, space.high).astype(space.dtype)


class HostEnvs:
    """A vector env of the numpy contract, seen as tensors on ``device``."""

    def __init__(
        self, envs: gym.vector.VectorEnv, device: torch.device, packed: bool | None = None
    ) -> None:
        """``packed``: the answer goes to the device as one copy (the default off the CPU;
        on the CPU its arrays are shared)."""
        self.envs, self.device, self.crossings = envs, torch.device(device), 0
        self._rest = rest_action(envs)
        self._packed = self.device.type != "cpu" if packed is None else packed
        #: every row finite: the common answer, one array (read, never written)
        self._all_rows = np.ones(envs.num_envs, dtype=bool)
        self._all_rows.flags.writeable = False

    def reset(self, seeds: list[int | None]) -> Tensor:
        obs, _ = self.envs.reset(seed=seeds)
        (obs,) = self._on_device(np.array(obs, dtype=np.float64))
        return obs

    def step(
        self, actions: Tensor, stepping: np.ndarray | None = None, read: bool = True
    ) -> tuple[EnvStep, HostStep]:
        self.crossings += 1  # the step is on the host: read whatever ``read`` says
        actions = actions.cpu().numpy()
        finite_actions = self._all_rows if every(np.isfinite(actions)) else _finite_rows(actions)
        if stepping is not None or finite_actions is not self._all_rows:
            valid = finite_actions if stepping is None else finite_actions & stepping
            if not valid.all():
                actions = np.where(valid[:, None], actions, self._rest)
        obs, rewards, terminated, truncated, infos = self.envs.step(actions)
        # copies: the env may write into its own arrays at its next step
        obs = np.array(obs, dtype=np.float64)  # float32 observations exactly
        next_obs = obs  # the same where no episode ended
        if "_final_obs" in infos:  # an ended episode's last observation is its s'
            next_obs = obs.copy()
            for k in np.flatnonzero(infos["_final_obs"]):
                next_obs[k] = infos["final_obs"][k]
        rewards = np.array(rewards, dtype=np.float64)
        terminated = np.array(terminated, dtype=bool)
        finite = self._all_rows
        if not (every(np.isfinite(next_obs)) and every(np.isfinite(rewards))):
            finite = _finite_rows(next_obs, rewards)
        all_finite = finite_actions is self._all_rows and finite is self._all_rows
        host = HostStep(rewards, terminated, np.array(truncated, dtype=bool), finite_actions,
                        finite, all_finite)  # fmt: skip
        return EnvStep(*self._on_device(obs, next_obs, rewards, terminated), infos), host

    def _on_device(self, *arrays: np.ndarray) -> list[Tensor]:
        """``arrays`` (the envs' answer, copies of their own) as tensors on the device: on
        the CPU they are (``torch.from_numpy`` shares their memory), elsewhere one copy of
        them packed; one crossing."""
        self.crossings += 1
        if not self._packed:
            return list(map(torch.from_numpy, arrays))
        rows = len(arrays[0])
        packed = np.concatenate([a.reshape(rows, -1).astype(np.float64) for a in arrays], 1)
        on_device = torch.as_tensor(packed, device=self.device)
        parts, start = [], 0
        for a in arrays:
            width = int(np.prod(a.shape[1:]))
            part = on_device[:, start : start + width].reshape(a.shape)
            parts.append(part > 0 if a.dtype == bool else part)
            start += width
        return parts


def _finite_rows(*arrays: np.ndarray) -> np.ndarray:
    """Whether each row of ``arrays`` (the same rows) is finite in all of them: where a
    step's one check of each array (every row finite, the common answer, ``_all_rows``
    itself) found one that is not."""
    return np.logical_and.reduce([np.isfinite(a).reshape(len(a), -1).all(1) for a in arrays])


class DeviceEnvs:
    """A vector env that steps on ``device`` (``step_tensors``, ``reset_tensors``)."""

    def __init__(self, envs: gym.vector.VectorEnv, device: torch.device) -> None:
        self.envs, self.device, self.crossings = envs, torch.device(device), 0
        self._rest = torch.as_tensor(rest_action(envs), device=self.device)

    def reset(self, seeds: list[int | None]) -> Tensor:
        return self.envs.reset_tensors(seeds)

    def step(
        self, actions: Tensor, stepping: np.ndarray | Tensor | None = None, read: bool = True
    ) -> tuple[EnvStep, HostStep | None]:
        finite_actions = torch.isfinite(actions).flatten(1).all(1)
        valid = finite_actions
        if isinstance(stepping, Tensor):  # the stopped rows' mask, already on the device
            valid = valid & stepping
        elif stepping is not None and not stepping.all():  # some rows stopped: their mask
            self.crossings += 1
            valid = valid & torch.as_tensor(stepping, device=self.device)
        step = self.envs.step_tensors(torch.where(valid[:, None], actions, self._rest))
        finite = torch.isfinite(step.final_obs).flatten(1).all(1) & torch.isfinite(step.rewards)
        if not read:  # nothing crosses: the flags stay on the device
            answer = EnvStep(step.obs, step.final_obs, step.rewards, step.terminated, {},
                             step.truncated, finite_actions, finite)  # fmt: skip
            return answer, None
        flags = [step.rewards, step.terminated, step.truncated, finite_actions, finite]
        success = step.entries.get("is_success")
        if success is not None:
            flags.append(success)
        self.crossings += 1  # the step's one copy to the host
        host = torch.stack([f.to(torch.float64) for f in flags], dim=1).cpu().numpy()
        bits = host[:, 1:] > 0
        host_step = HostStep(host[:, 0], bits[:, 0], bits[:, 1], bits[:, 2], bits[:, 3],
                             bool(bits[:, 2:4].all()))  # fmt: skip
        infos = {} if success is None else _final_success(bits[:, 4], bits[:, 0] | bits[:, 1])
        return EnvStep(step.obs, step.final_obs, step.rewards, step.terminated, infos), host_step


def _final_success(succeeded: np.ndarray, done: np.ndarray) -> dict:
    """The ended episodes' success as the vector contract lays out ``final_info``
    (:mod:`agents.common.vector_envs`); {} where no episode ended."""
    if not np.count_nonzero(done):
        return {}
    final = {"is_success": succeeded & done, "_is_success": done.copy()}
    return {"final_info": final, "_final_info": done.copy()}


def tensor_envs(envs: gym.vector.VectorEnv, device: torch.device | str) -> TensorEnvs:
    """``envs`` as the engine at ``device`` steps them: on the device where they step there
    (:class:`DeviceEnvs`), through the host otherwise (:class:`HostEnvs`)."""
    device = torch.device(device)
    if hasattr(envs, "step_tensors") and _same_device(envs.device, device):
        return DeviceEnvs(envs, device)
    return HostEnvs(envs, device)


def _same_device(a: torch.device, b: torch.device) -> bool:
    index = torch.cuda.current_device if a.type == "cuda" and torch.cuda.is_available() else None
    resolved = [
        d if d.index is not None or index is None else torch.device(d.type, index()) for d in (a, b)
    ]
    return resolved[0] == resolved[1]

"""N copies of one env stepped together: the project's batched implementation of a task, its
MuJoCo Warp implementation on a GPU, or a loop over gymnasium envs.

A population steps its members' envs, and a test phase its members' test episodes, as one
:class:`gymnasium.vector.VectorEnv` from :func:`make_vector_env`. Which kind is its
``backend`` (one of :data:`BACKENDS`), decided there and nowhere else:

* ``batch``: where the project has a batched implementation of the id (:data:`BATCHED`: array
  code over the copies, one MuJoCo ``mujoco.batch.Batch`` for a MuJoCo task) that is what it
  returns; any other env is a :class:`LoopVectorEnv`, gymnasium's ``SyncVectorEnv`` over
  :func:`make_env` copies (a Python loop, as a population stepped before), and the log says
  so once per env id;
* ``loop``: the :class:`LoopVectorEnv` for any env;
* ``warp``: the MuJoCo Warp implementation (:data:`WARP`; the optional extra ``gpu``) on the
  ``device`` asked for — a CUDA device, or Warp's CPU backend for ``cpu``; an id without one,
  or MuJoCo Warp not installed, is one :class:`ConfigError` line;
* ``torch``: the array task as torch code on the ``device`` asked for (:data:`TORCH`: the
  mountain car, :mod:`agents.tasks.torch_mountain_car`), any device, the CPU included; an id
  without one is one :class:`ConfigError` line;
* ``auto`` (the default): on a CUDA device ``torch`` for an id in :data:`TORCH`, ``warp`` for
  an id in :data:`WARP` when MuJoCo Warp is installed (without it the log says once how to
  install it); ``batch`` otherwise (on a CPU always: its numpy tasks equal their single envs
  bit for bit).

**The contract** every vector env this module returns keeps, so that its user cannot tell
the two apart but by speed:

* ``autoreset_mode`` is ``AutoresetMode.SAME_STEP`` (``metadata["autoreset_mode"]``): a
  sub-env whose episode ends (terminated or truncated) is reset within the same ``step``;
  the step returns the new episode's first observation in its row, and the finished
  episode's last observation in ``infos["final_obs"][i]`` (an object array, ``None`` in the
  rows that did not finish) with ``infos["_final_obs"]`` the mask of the rows that did; the
  finished episode's last ``info`` is in ``infos["final_info"]`` (a dict of arrays with
  their ``_<key>`` masks) and ``infos["_final_info"]`` — gymnasium 1.4's names and layout
  (``SyncVectorEnv.step``, ``VectorEnv._add_info``);
* every other key of a sub-env's ``info`` is ``infos[key]`` (N,) with its mask
  ``infos["_" + key]``, as ``SyncVectorEnv`` lays it out: in a row that was reset the value
  is the reset's ``info``'s (none, for every task here: mask False). Success is
  ``infos["is_success"]`` while an episode runs and ``infos["final_info"]["is_success"]`` at
  its last step;
* ``reset(seed=[s_0, …, s_{N-1}])`` seeds the copies (an int ``s`` means ``[s, s+1, …]``,
  ``None`` fresh entropy, as ``SyncVectorEnv``); ``options={"reset_mask": mask}`` resets the
  masked rows only;
* observations, rewards, terminations and truncations are arrays of shape (N, …): the
  observations of the single env's observation space's dtype (float32 for the mountain car,
  float64 for MuJoCo), rewards float64, terminations and truncations bool — the single env's
  values (its wrappers, the time limit included) for the same state and action;
* ``pop_coverage() -> list[dict[str, float]]``: each sub-env's coverage since the last call,
  as :func:`agents.common.envs.coverage_statistics` reads it from one env ({} for a task
  that reports none).

The batched implementations draw every random quantity of a step once for all copies: one
``np.random.Generator`` per vector env, made at ``reset(seed=seeds)`` as
``np.random.default_rng(seeds)`` (the list of N seeds is its entropy, so the same seeds give
the same start states, and copy k's states are not those of a single env seeded ``s_k``);
an autoreset draws the start states of the copies that finished, in row order (one call
for all of them). With ``None`` among the seeds, the generator takes fresh entropy. A
:class:`LoopVectorEnv` seeds each copy as ``SyncVectorEnv`` does.

The Warp envs and the torch tasks keep the contract to a tolerance instead (float32
arithmetic), draw their start states from a ``torch.Generator`` on their device, and also step
as torch tensors on the device without a copy (:mod:`agents.tasks.device_vector_env`;
MuJoCo's in :mod:`agents.tasks.warp_batch`).

Measured (N = 10 copies, random actions, 2 s each, side by side on a 2-core machine that
others loaded): ``SparseMountainCar-v0`` batched 95 k env-steps/s against the loop's 39 k
(2.4×), ``HalfCheetah-v4`` 9.1–9.6 k against 5.7–5.9 k (1.6×; the simulation itself is 90 %
of the batched step).
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from gymnasium.vector import AutoresetMode, SyncVectorEnv, VectorEnv

from .devices import resolve_device
from .envs import coverage_statistics, episode_limit, from_unit_range, make_env
from .errors import ConfigError

#: env id → ``"module:callable"`` of its batched implementation, imported when first used
#: (the implementations live with the tasks, which this family does not import). The
#: callable takes ``(single_env, num_envs, max_episode_steps)`` — ``single_env`` made by
#: :func:`make_env` with the run's ``env_kwargs``, from which it reads the task's settings —
#: and returns a :class:`VectorEnv` keeping the contract above, or None when it cannot
#: represent that env (a setting it does not model), which then falls back to the loop.
BATCHED: dict[str, str] = {
    "SparseMountainCar-v0": "agents.tasks.mountain_car_batch:batched_mountain_car",
    "MountainCarContinuous-v0": "agents.tasks.mountain_car_batch:batched_mountain_car",
    "SparseHalfCheetah-v5": "agents.tasks.sparse_mujoco_batch:batched_sparse_mujoco",
    "SparseCartpoleSwingup-v0": "agents.tasks.sparse_mujoco_batch:batched_sparse_mujoco",
    "SparseDoublePendulum-v0": "agents.tasks.sparse_mujoco_batch:batched_sparse_mujoco",
    "HalfCheetah-v4": "agents.tasks.locomotion_batch:batched_locomotion",
    "Hopper-v4": "agents.tasks.locomotion_batch:batched_locomotion",
    "Walker2d-v4": "agents.tasks.locomotion_batch:batched_locomotion",
    "Ant-v4": "agents.tasks.locomotion_batch:batched_locomotion",
}

#: env id → ``"module:callable"`` of its MuJoCo Warp implementation (the ``gpu`` extra),
#: imported when first used. The callable takes ``BATCHED``'s arguments and the Warp device
#: name, and returns None for an env it cannot represent (then ``auto`` falls back to
#: ``batch`` and ``warp`` is refused).
WARP: dict[str, str] = {
    "HalfCheetah-v4": "agents.tasks.warp_locomotion:warp_locomotion",
    "Hopper-v4": "agents.tasks.warp_locomotion:warp_locomotion",
    "SparseHalfCheetah-v5": "agents.tasks.warp_sparse:warp_sparse_mujoco",
    "SparseCartpoleSwingup-v0": "agents.tasks.warp_sparse:warp_sparse_mujoco",
    "SparseDoublePendulum-v0": "agents.tasks.warp_sparse:warp_sparse_mujoco",
}

#: env id → ``"module:callable"`` of its implementation as torch code on a device (the array
#: tasks: :mod:`agents.tasks.torch_mountain_car`), with ``WARP``'s arguments and answers.
TORCH: dict[str, str] = {
    "SparseMountainCar-v0": "agents.tasks.torch_mountain_car:torch_mountain_car",
    "MountainCarContinuous-v0": "agents.tasks.torch_mountain_car:torch_mountain_car",
}

#: What the ``warp`` backend imports, and the extra that installs it (pyproject.toml).
WARP_MODULES = ("warp", "mujoco_warp")
WARP_INSTALL = "pip install 'param-explore[gpu]'"

#: The kinds that step on the run's device: their tables and their names in an error line.
ON_DEVICE: dict[str, tuple[dict[str, str], str]] = {
    "warp": (WARP, "MuJoCo Warp"),
    "torch": (TORCH, "torch"),
}

#: The kinds of vector env :func:`make_vector_env` builds (module docstring).
BACKENDS = ("auto", "warp", "torch", "batch", "loop")

_said: set[str] = set()


class LoopVectorEnv(SyncVectorEnv):
    """gymnasium's ``SyncVectorEnv`` in ``SAME_STEP`` mode, with the coverage of its copies."""

    def __init__(self, env_fns: list[Callable[[], gym.Env]]) -> None:
        super().__init__(env_fns, autoreset_mode=AutoresetMode.SAME_STEP)

    def pop_coverage(self) -> list[dict[str, float]]:
        """Each copy's coverage since the last call ({} where its task reports none)."""
        return [coverage_statistics(env) for env in self.envs]


class OneEnv(VectorEnv):
    """An env the caller made (a single run's own) as a vector env of one, keeping the
    contract above (its ``info`` laid out by ``VectorEnv._add_info``, as ``SyncVectorEnv``
    does). Why not ``SyncVectorEnv`` over it: its per-space iteration, concatenation and
    deep copy of the observations cost ~35 µs a step, a tenth of a small network's whole
    step (a single run of the sparse mountain car makes ~3 k steps/s)."""

    def __init__(self, env: gym.Env) -> None:
        self.env = env
        self.num_envs = 1
        self.single_observation_space = env.observation_space
        self.single_action_space = env.action_space
        self.observation_space = gym.vector.utils.batch_space(env.observation_space, 1)
        self.action_space = gym.vector.utils.batch_space(env.action_space, 1)
        self.metadata = {**env.metadata, "autoreset_mode": AutoresetMode.SAME_STEP}
        self.render_mode = env.render_mode
        self._dtype = env.observation_space.dtype

    def reset(
        self, *, seed: int | list[int | None] | None = None, options: dict | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        if isinstance(seed, list):
            if len(seed) != 1:
                raise ValueError(f"one env takes one seed, got {len(seed)}")
            seed = seed[0]
        options = dict(options or {})
        mask = options.pop("reset_mask", None)
        if mask is not None and not np.asarray(mask).any():
            raise ValueError("`options['reset_mask']` must contain at least one True value")
        obs, info = self.env.reset(seed=seed, options=options or None)
        return np.array(obs, dtype=self._dtype)[None], self._add_info({}, info, 0)

    def step(
        self, actions: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(actions[0])
        infos: dict[str, Any] = {}
        if terminated or truncated:
            infos = self._add_info(infos, {"final_obs": obs, "final_info": info}, 0)
            obs, info = self.env.reset()
        if info:  # (an empty info adds nothing)
            infos = self._add_info(infos, info, 0)
        return (
            np.array(obs, dtype=self._dtype)[None],
            np.array([reward], dtype=np.float64),
            np.array([terminated], dtype=np.bool_),
            np.array([truncated], dtype=np.bool_),
            infos,
        )

    def pop_coverage(self) -> list[dict[str, float]]:
        """The env's coverage since the last call ({} where its task reports none)."""
        return [coverage_statistics(self.env)]


def make_vector_env(
    env_id: str,
    num_envs: int,
    env_kwargs: dict[str, Any] | None = None,
    max_episode_steps: int | None = None,
    *,
    normalize_actions: bool = False,
    wrap: Callable[[gym.Env], gym.Env] | None = None,
    backend: str = "auto",
    device: str | torch.device = "cpu",
) -> VectorEnv:
    """``num_envs`` copies of ``env_id`` as one vector env keeping the module's contract.

    ``env_kwargs`` and ``max_episode_steps`` are :func:`make_env`'s (a bad one is its
    :class:`ConfigError`, raised before anything else is built). ``normalize_actions``
    takes the actions in [−1, 1] as :class:`agents.common.envs.NormalizedActions` does.
    ``wrap`` is applied to each copy of the loop (the runs give
    :func:`agents.tasks.with_task_report`); a batched implementation reports its task itself.
    ``backend`` picks the kind (module docstring) and ``device`` (a run's ``--device``:
    ``auto``, ``cpu``, ``cuda``, ``cuda:N``) is where ``auto`` and ``warp`` look.
    """
    if isinstance(num_envs, bool) or not isinstance(num_envs, int) or num_envs < 1:
        raise ConfigError(f"num_envs must be a positive integer, got {num_envs!r}")
    if backend not in BACKENDS:
        raise ConfigError(f"backend must be one of {', '.join(BACKENDS)}, got {backend!r}")
    kind = backend
    if backend in ("auto", "warp", "torch"):
        device = resolve_device(device)
        kind = _on_device_or_batch(env_id, backend, device)
    single = make_env(env_id, env_kwargs, max_episode_steps)
    limit = episode_limit(single)
    vector = None
    if kind in ON_DEVICE:
        table, name = ON_DEVICE[kind]
        vector = _implementation(table[env_id])(single, num_envs, limit, str(device))
        if vector is None and backend == kind:
            single.close()
            raise ConfigError(f"{env_id} with these settings has no {name} implementation")
    if vector is None and kind != "loop":
        entry_point = BATCHED.get(env_id)
        if entry_point is not None:
            vector = _implementation(entry_point)(single, num_envs, limit)
        if vector is None:
            why = (
                "no batched implementation"
                if entry_point is None
                else ("settings its batched form does not model")
            )
            _say_once(env_id, f"{env_id}: {why}; its {num_envs} copies step in a Python loop")
    if vector is None:
        vector = _loop(single, num_envs, env_id, env_kwargs, max_episode_steps, wrap)
    else:
        single.close()
    if normalize_actions:
        on_device = hasattr(vector, "step_tensors")
        vector = (NormalizedDeviceActions if on_device else NormalizedVectorActions)(vector)
    return vector


def _implementation(entry_point: str) -> Callable[..., VectorEnv | None]:
    module, name = entry_point.split(":")
    return getattr(importlib.import_module(module), name)


def _on_device_or_batch(env_id: str, backend: str, device: torch.device) -> str:
    """``auto``, ``warp`` and ``torch`` resolved: on a CUDA device ``auto`` is ``torch`` for an
    array task, ``warp`` for a MuJoCo task where MuJoCo Warp can be imported; a ``warp`` or
    ``torch`` that cannot apply is one error line; ``batch`` otherwise."""
    if backend == "torch" or (backend == "auto" and device.type == "cuda" and env_id in TORCH):
        if env_id not in TORCH:
            raise ConfigError(
                f"{env_id} has no torch implementation (the torch backend steps "
                f"{', '.join(sorted(TORCH))})"
            )
        return "torch"
    if backend == "auto" and (device.type != "cuda" or env_id not in WARP):
        return "batch"
    if env_id not in WARP:
        raise ConfigError(
            f"{env_id} has no MuJoCo Warp implementation (the warp backend steps "
            f"{', '.join(sorted(WARP))})"
        )
    if backend == "auto" and not _installed(WARP_MODULES):
        _say_once(
            f"{env_id}:warp",
            f"{env_id} on {device}: MuJoCo Warp is not installed, so its copies step on the "
            f"CPU in one MuJoCo batch ({WARP_INSTALL} steps them on the GPU)",
        )
        return "batch"
    require_mujoco_warp()
    return "warp"


def require_mujoco_warp() -> None:
    """MuJoCo Warp importable, or one :class:`ConfigError` line naming the extra."""
    missing = [module for module in WARP_MODULES if not _installed((module,))]
    if missing:
        raise ConfigError(
            f"the warp vector env backend needs MuJoCo Warp ({', '.join(missing)} missing), "
            f"an optional dependency: {WARP_INSTALL}"
        )


def _installed(modules: tuple[str, ...]) -> bool:
    return all(importlib.util.find_spec(module) is not None for module in modules)


def _loop(
    first: gym.Env,
    num_envs: int,
    env_id: str,
    env_kwargs: dict[str, Any] | None,
    max_episode_steps: int | None,
    wrap: Callable[[gym.Env], gym.Env] | None,
) -> LoopVectorEnv:
    wrap = wrap or (lambda env: env)
    fns = [lambda: wrap(first)] + [
        lambda: wrap(make_env(env_id, env_kwargs, max_episode_steps))
    ] * (num_envs - 1)
    return LoopVectorEnv(fns)


def _say_once(key: str, message: str) -> None:
    if key not in _said:
        _said.add(key)
        print(f"note: {message} (shown once per process)", file=sys.stderr, flush=True)


class NormalizedVectorActions(gym.vector.VectorActionWrapper):
    """:class:`agents.common.envs.NormalizedActions` for all copies at once: actions in
    [−1, 1] per dimension, mapped to the env's range and clipped (the same function)."""

    def __init__(self, env: VectorEnv) -> None:
        super().__init__(env)
        space = env.single_action_space
        self.single_action_space = gym.spaces.Box(-1.0, 1.0, space.shape, dtype=space.dtype)
        self.action_space = gym.vector.utils.batch_space(self.single_action_space, env.num_envs)

    def actions(self, actions: np.ndarray) -> np.ndarray:
        return from_unit_range(actions, self.env.single_action_space)

    def pop_coverage(self) -> list[dict[str, float]]:
        return self.env.pop_coverage()


class NormalizedDeviceActions(NormalizedVectorActions):
    """:class:`NormalizedVectorActions` for a vector env that steps on its device
    (:mod:`agents.tasks.device_vector_env`): its device face keeps the step there, the same
    map (float64, clipped, the space's dtype) computed in torch."""

    def __init__(self, env: VectorEnv) -> None:
        super().__init__(env)
        self.device = env.device
        space = env.single_action_space
        self._low = torch.as_tensor(space.low, dtype=torch.float64, device=self.device)
        self._high = torch.as_tensor(space.high, dtype=torch.float64, device=self.device)
        self._dtype = torch.from_numpy(np.zeros(0, space.dtype)).dtype

    def reset_tensors(
        self, seed: int | list[int | None] | None = None, mask: torch.Tensor | None = None
    ) -> torch.Tensor:
        return self.env.reset_tensors(seed, mask)

    def step_tensors(self, actions: torch.Tensor) -> Any:
        low, high = self._low, self._high
        scaled = low + (actions.to(torch.float64) + 1.0) * 0.5 * (high - low)
        return self.env.step_tensors(torch.clamp(scaled, low, high).to(self._dtype))

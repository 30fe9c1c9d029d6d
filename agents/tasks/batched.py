"""What every batched task shares: N copies of one env as arrays, in gymnasium's vector form.

A batched task is a :class:`gymnasium.vector.VectorEnv` whose copies are rows of arrays,
stepped by array code instead of a loop over gymnasium envs; it keeps the contract of
:mod:`agents.common.vector_envs` (SAME_STEP autoreset, ``SyncVectorEnv``'s info layout,
the single env's dtypes, the time limit, ``pop_coverage()`` per copy). This base owns
that part once — seeding, the time limit, the autoreset and the infos — and a task gives
its states' arithmetic: :meth:`BatchedEnv._start` (draw and set start states of some
copies), :meth:`BatchedEnv._observe` and :meth:`BatchedEnv._advance` (one step of all
copies: rewards, terminations, the step's info entries as arrays).

Randomness: one ``np.random.Generator`` for all copies, ``np.random.default_rng(seeds)``
at a seeded reset (the N seeds are its entropy), so a start-state draw is one call for all
the copies that start.
"""

from __future__ import annotations

from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from .report import Coverage


class BatchedReport:
    """:class:`agents.tasks.report.TaskReport` for N copies at once: success in each copy's
    episode, and each copy's extremes over the window since the last ``pop_coverage``.

    Its step (:meth:`record`) is written once for numpy arrays and torch tensors (``_xp``,
    the array module: :class:`agents.tasks.device_vector_env.TensorReport` keeps the same
    arrays on a torch device)."""

    _xp: Any = np

    def __init__(self, coverage: Coverage, num_envs: int) -> None:
        self.coverage = coverage
        self.succeeded = np.zeros(num_envs, dtype=bool)
        self._recorded = np.zeros(num_envs, dtype=bool)
        self._window = {name: np.full(num_envs, np.nan) for name in coverage.scalars}

    def start_episode(self, ids: np.ndarray) -> None:
        self.succeeded[ids] = False

    def record(self, goal_reached: Any, **values: Any) -> dict[str, Any]:
        """One step of every copy; returns its ``is_success`` entry, as the single env's."""
        xp = self._xp
        self.succeeded |= goal_reached
        first = ~self._recorded
        for name in self.coverage.highest:
            window, value = self._window[f"{name}_max"], self._float64(values[name])
            window[:] = xp.where(first, value, xp.maximum(window, value))
        for name in self.coverage.lowest:
            window, value = self._window[f"{name}_min"], self._float64(values[name])
            window[:] = xp.where(first, value, xp.minimum(window, value))
        self._recorded[:] = True
        return {"is_success": self._copy(self.succeeded)}

    def pop_coverage(self) -> list[dict[str, float]]:
        """Each copy's extremes ({} for a copy with no step since the last call)."""
        names = list(self._window)
        windows, recorded = self._host_windows()
        rows = [
            {name: float(windows[k][i]) for k, name in enumerate(names)} if recorded[i] else {}
            for i in range(len(recorded))
        ]
        self._recorded[:] = False
        return rows

    @staticmethod
    def _float64(values: Any) -> Any:
        return np.asarray(values, np.float64)

    @staticmethod
    def _copy(values: Any) -> Any:
        return values.copy()

    def _host_windows(self) -> tuple[Any, np.ndarray]:
        """The windows (one per name, in order) and which copies recorded, on the host."""
        return list(self._window.values()), self._recorded


class BatchedEnv(VectorEnv):
    """N copies of ``single_env``'s task; subclasses give its arithmetic (module docstring).

    ``single_env`` (made by ``gym.make``, with the run's settings) gives the spaces, the
    spec and the settings the subclass reads; ``max_episode_steps`` is its time limit.
    """

    metadata: ClassVar[dict[str, Any]] = {"autoreset_mode": AutoresetMode.SAME_STEP}
    #: the quantities and goal the task reports (None: it reports none)
    coverage: ClassVar[Coverage | None] = None

    def __init__(self, single_env: gym.Env, num_envs: int, max_episode_steps: int | None) -> None:
        show_copies(self, single_env, num_envs, max_episode_steps)
        self.report = None if self.coverage is None else BatchedReport(self.coverage, num_envs)
        self.np_random = np.random.default_rng()
        self._elapsed = np.zeros(num_envs, dtype=np.int64)
        self._obs_dtype = self.single_observation_space.dtype

    # ---------------------------------------------------------------- what a task gives
    def _start(self, ids: np.ndarray) -> None:
        """Draw the start states of copies ``ids`` from ``self.np_random`` (one draw for
        all of them) and set them."""
        raise NotImplementedError

    def _observe(self) -> np.ndarray:
        """Every copy's observation, (N, …) in any float dtype (cast to the space's)."""
        raise NotImplementedError

    def _advance(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
        """One step of every copy: rewards (N,), terminations (N,) and the step's info
        entries, each an (N,) array (a task's report included)."""
        raise NotImplementedError

    # ------------------------------------------------------------------- the vector env
    def reset(
        self, *, seed: int | list[int | None] | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        ids = np.arange(self.num_envs)
        if options and "reset_mask" in options:
            mask = np.asarray(options["reset_mask"])
            if mask.shape != (self.num_envs,) or mask.dtype != np.bool_ or not mask.any():
                raise ValueError(
                    f"reset_mask must be a ({self.num_envs},) bool array, not all False"
                )
            ids = np.flatnonzero(mask)
        if seed is not None:
            seeds = [seed + i for i in range(self.num_envs)] if isinstance(seed, int) else seed
            if len(seeds) != self.num_envs:
                raise ValueError(f"{len(seeds)} seeds for {self.num_envs} envs")
            entropy = None if any(s is None for s in seeds) else [int(s) for s in seeds]
            self.np_random = np.random.default_rng(entropy)
        self._begin(ids)
        return self._observe().astype(self._obs_dtype), {}

    def step(
        self, actions: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        actions = np.asarray(actions)
        if actions.shape != self.action_space.shape:
            raise ValueError(
                f"actions of shape {actions.shape}, expected {self.action_space.shape}"
            )
        rewards, terminated, entries = self._advance(actions)
        self._elapsed += 1
        if self.max_episode_steps is None:
            truncated = np.zeros(self.num_envs, dtype=bool)
        else:
            truncated = self._elapsed >= self.max_episode_steps
        obs = self._observe().astype(self._obs_dtype)
        done = terminated | truncated
        infos = _infos(entries, ~done)
        if np.count_nonzero(done):  # (cheaper than .any() on a few rows)
            ids = np.flatnonzero(done)
            final_obs = np.full(self.num_envs, None, dtype=object)
            for i in ids:
                final_obs[i] = obs[i].copy()
            infos["final_obs"], infos["_final_obs"] = final_obs, done
            infos["final_info"], infos["_final_info"] = _infos(entries, done), done.copy()
            self._begin(ids)
            obs[ids] = self._observe()[ids]
        return obs, np.asarray(rewards, np.float64), terminated, truncated, infos

    def pop_coverage(self) -> list[dict[str, float]]:
        """Each copy's coverage since the last call ({} for a task that reports none)."""
        if self.report is None:
            return [{} for _ in range(self.num_envs)]
        return self.report.pop_coverage()

    def _begin(self, ids: np.ndarray) -> None:
        self._elapsed[ids] = 0
        if self.report is not None:
            self.report.start_episode(ids)
        self._start(ids)


def form_for(single_env: gym.Env, forms: dict[type, type]) -> type | None:
    """The class in ``forms`` (a task's env class → its form for N copies) of
    ``single_env``'s task, or None for one it does not model: another class (a subclass has
    rules of its own), or a render mode."""
    env = single_env.unwrapped
    form = forms.get(type(env))
    return None if form is None or env.render_mode is not None else form


def show_copies(
    vector: VectorEnv, single_env: gym.Env, num_envs: int, max_episode_steps: int | None
) -> None:
    """What a vector env of ``single_env``'s N copies shows of them: its spaces (the single
    env's, batched), spec, metadata (its class's) and time limit."""
    vector.num_envs = num_envs
    vector.single_observation_space = single_env.observation_space
    vector.single_action_space = single_env.action_space
    vector.observation_space = batch_space(vector.single_observation_space, num_envs)
    vector.action_space = batch_space(vector.single_action_space, num_envs)
    vector.spec = single_env.spec
    vector.metadata = {**type(vector).metadata}
    vector.max_episode_steps = max_episode_steps


def _infos(entries: dict[str, np.ndarray], rows: np.ndarray) -> dict[str, Any]:
    """``entries`` of the copies in ``rows`` as ``VectorEnv._add_info`` lays them out: each
    key with its ``_key`` mask, zeros outside ``rows``; none where no row has them."""
    if not np.count_nonzero(rows):
        return {}
    infos: dict[str, Any] = {}
    for key, values in entries.items():
        values = np.asarray(values)
        infos[key] = np.where(rows, values, np.zeros((), values.dtype))
        infos[f"_{key}"] = rows.copy()
    return infos

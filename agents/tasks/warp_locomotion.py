"""gymnasium's ``HalfCheetah-v4`` and ``Hopper-v4`` for N copies in MuJoCo Warp: the vector env
that keeps a MuJoCo task's step on the device of a run on a GPU.

MuJoCo Warp (``mujoco_warp``, the optional extra ``pip install 'param-explore[gpu]'``, pinned to
the release of the installed ``mujoco``) steps N worlds of one model as Warp kernels, on a CUDA
device or on Warp's CPU backend (a correctness path: its kernels compile once, then are cached
in Warp's kernel cache, ``WARP_CACHE_PATH``). Its state arrays are handed to torch with
``warp.to_torch``, which shares their memory: ``qpos``, ``qvel``, ``ctrl`` and
``qacc_warmstart`` are (N, …) float32 tensors on the env's device that are Warp's arrays, and
the task's arithmetic (rewards, terminations, observations, the time limit, the autoreset's
start states) is torch code on them. So one step has two faces:

* :meth:`WarpLocomotion.step_tensors` — torch in, torch out, all on the device: no copy and no
  host synchronisation (the autoreset draws start states for every row and keeps them where an
  episode ended, rather than asking the host which rows did);
* :meth:`WarpLocomotion.step` — the contract of :mod:`agents.common.vector_envs` for an engine
  that consumes numpy: the actions go to the device (one host→device copy), and the step's
  results come back packed in one tensor (one device→host copy; none on Warp's CPU backend,
  where a tensor's ``.numpy()`` is a view), cast to the single env's dtypes (float64
  observations and rewards) and laid out as ``SyncVectorEnv`` lays out its infos.

On a CUDA device the physics of a step is one CUDA graph, captured at the first step and
replayed after (:meth:`WarpLocomotion._physics` says why: 22× the kernel-by-kernel launches).

Each copy computes what ``gymnasium/envs/mujoco/{half_cheetah,hopper}_v4.py`` computes with the
single env's settings (as :mod:`.locomotion_batch`, whose module docstring lists them), in
float32 where MuJoCo computes in float64: MuJoCo Warp's documentation says its results differ
from MuJoCo's for that reason (and that its solver tolerance is raised to 1e-6 for it), so the
Warp env equals gymnasium's env to a tolerance (``tests/test_vector_envs.py`` justifies it), not
to 1e-12 as the ``mujoco.batch`` envs do; on a GPU, MuJoCo Warp is not deterministic either
(atomic operations), Warp's CPU backend is.

A start (reset or autoreset) does what ``MujocoEnv.reset`` does — ``mj_resetData`` (of its
effects, what these models carry to the next step: the solver's warm start, cleared), then qpos
and qvel — and skips ``mj_forward``, whose results nothing reads before the next ``mj_step``
recomputes them (these tasks observe qpos and qvel only). Start states come from one
``torch.Generator`` on the device, seeded from the reset's seeds
(``np.random.SeedSequence(seeds)``), so the same seeds give the same start states on one
device; they are not the ``mujoco.batch`` env's draws.
"""

from __future__ import annotations

from typing import Any, ClassVar, NamedTuple

import gymnasium as gym
import numpy as np
import torch
from gymnasium.envs.mujoco.half_cheetah_v4 import HalfCheetahEnv
from gymnasium.envs.mujoco.hopper_v4 import HopperEnv
from gymnasium.vector import AutoresetMode, VectorEnv

from .batched import _infos, show_copies


def load_mujoco_warp() -> tuple[Any, Any]:
    """``(warp, mujoco_warp)``, imported on first use, Warp's per-kernel log lines off
    (:func:`agents.common.vector_envs.make_vector_env` says first, in one line, when the
    extra is missing)."""
    import mujoco_warp
    import warp

    warp.config.quiet = True
    warp.config.log_level = warp.LOG_WARNING
    return warp, mujoco_warp


class TensorStep(NamedTuple):
    """One step of every copy, as tensors on the env's device."""

    #: (N, obs) the next observations: a new episode's first where one ended
    obs: torch.Tensor
    #: (N,) float32
    rewards: torch.Tensor
    #: (N,) bool
    terminated: torch.Tensor
    #: (N,) bool: the time limit reached
    truncated: torch.Tensor
    #: (N, obs) each row's observation before an autoreset: the finished episode's last where
    #: ``terminated | truncated``, equal to ``obs`` elsewhere
    final_obs: torch.Tensor
    #: the single env's info entries, (N,) float32 each
    entries: dict[str, torch.Tensor]


class WarpLocomotion(VectorEnv):
    """N copies of ``HalfCheetah-v4`` or ``Hopper-v4`` in one MuJoCo Warp ``Data`` on ``device``
    (a Warp device name: ``cuda``, ``cuda:1``, ``cpu``)."""

    metadata: ClassVar[dict[str, Any]] = {"autoreset_mode": AutoresetMode.SAME_STEP}

    def __init__(
        self, single_env: gym.Env, num_envs: int, max_episode_steps: int | None, device: str
    ) -> None:
        wp, mjw = load_mujoco_warp()
        env = single_env.unwrapped
        show_copies(self, single_env, num_envs, max_episode_steps)

        self._wp, self._mjw = wp, mjw
        self.wp_device = wp.get_device(device)
        self.device = torch.device(wp.device_to_torch(self.wp_device))
        self._stream = None
        #: on a CUDA device, the physics of one env step as a CUDA graph (captured at the
        #: first step; ``False``: launched kernel by kernel, what the equality test compares)
        self.use_graph = self.wp_device.is_cuda
        self._graph = None
        with self._scope():
            self.model = mjw.put_model(env.model)
            self.data = mjw.make_data(env.model, nworld=num_envs)
        wp.synchronize_device(self.wp_device)
        self.qpos, self.qvel = wp.to_torch(self.data.qpos), wp.to_torch(self.data.qvel)
        self.ctrl, self.time = wp.to_torch(self.data.ctrl), wp.to_torch(self.data.time)
        self.qacc_warmstart = wp.to_torch(self.data.qacc_warmstart)

        self.task = type(env)
        self.frame_skip, self.dt = env.frame_skip, env.dt
        self.init_qpos = torch.as_tensor(env.init_qpos, **self._f32)
        self.init_qvel = torch.as_tensor(env.init_qvel, **self._f32)
        self.forward_weight = env._forward_reward_weight
        self.ctrl_weight = env._ctrl_cost_weight
        self.noise = env._reset_noise_scale
        self.first = 1 if env._exclude_current_positions_from_observation else 0
        if self.task is HopperEnv:
            self.healthy_reward = float(env._healthy_reward)
            self.terminate_when_unhealthy = env._terminate_when_unhealthy
            self.z_range, self.angle_range = env._healthy_z_range, env._healthy_angle_range
            self.state_range = env._healthy_state_range
        self.generator = torch.Generator(self.device)
        self._seed(None)
        self._elapsed = torch.zeros(num_envs, dtype=torch.int64, device=self.device)
        self._obs_dtype = self.single_observation_space.dtype
        #: the numpy dtype of each info entry: the single env's
        self._entry_dtypes = {
            "x_position": np.float64,
            "x_velocity": np.float64,
            **(
                {"reward_run": np.float64, "reward_ctrl": self.single_action_space.dtype}
                if self.task is HalfCheetahEnv
                else {}
            ),
        }

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
        self._start(mask)
        return self._observe()

    def step_tensors(self, actions: torch.Tensor) -> TensorStep:
        """One step of every copy from ``actions`` (N, act) on the device, the autoreset
        included; nothing leaves the device."""
        x_before = self.qpos[:, 0].clone()
        self.ctrl.copy_(actions)
        self._physics()
        x_after = self.qpos[:, 0].clone()
        x_velocity = (x_after - x_before) / self.dt
        ctrl_cost = self.ctrl_weight * actions.to(torch.float32).square().sum(dim=1)
        forward_reward = self.forward_weight * x_velocity
        entries = {"x_position": x_after, "x_velocity": x_velocity}
        if self.task is HalfCheetahEnv:
            rewards = forward_reward - ctrl_cost
            terminated = torch.zeros(self.num_envs, dtype=torch.bool, device=self.device)
            entries |= {"reward_run": forward_reward, "reward_ctrl": -ctrl_cost}
        else:
            healthy = self._healthy()
            rewards = forward_reward - ctrl_cost
            rewards += (healthy | self.terminate_when_unhealthy) * self.healthy_reward
            terminated = ~healthy if self.terminate_when_unhealthy else torch.zeros_like(healthy)
        self._elapsed += 1
        if self.max_episode_steps is None:
            truncated = torch.zeros_like(terminated)
        else:
            truncated = self._elapsed >= self.max_episode_steps
        final_obs = self._observe()
        done = terminated | truncated
        self._start(done)
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
        one host→device copy (the actions) and the one device→host copy (every result, packed)
        of a step on a GPU."""
        actions = np.asarray(actions)
        if actions.shape != self.action_space.shape:
            raise ValueError(
                f"actions of shape {actions.shape}, expected {self.action_space.shape}"
            )
        step = self.step_tensors(torch.as_tensor(actions, device=self.device))
        columns = [step.obs, step.final_obs, step.rewards[:, None]]
        columns += [step.terminated[:, None], step.truncated[:, None]]
        columns += [value[:, None] for value in step.entries.values()]
        packed = torch.cat([column.to(torch.float32) for column in columns], dim=1)
        host = packed.cpu().numpy()  # the step's one device→host copy
        width = step.obs.shape[1]
        obs = host[:, :width].astype(self._obs_dtype)
        final = host[:, width : 2 * width].astype(self._obs_dtype)
        rewards = host[:, 2 * width].astype(np.float64)
        terminated, truncated = host[:, 2 * width + 1] > 0, host[:, 2 * width + 2] > 0
        entries = {
            key: host[:, 2 * width + 3 + k].astype(self._entry_dtypes[key])
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
        """{} per copy: these tasks report no coverage."""
        return [{} for _ in range(self.num_envs)]

    def close_extras(self, **kwargs) -> None:
        self.model = self.data = None  # the worlds' device memory

    # ------------------------------------------------------------------------ internals
    def _seed(self, entropy: list[int] | None) -> None:
        state = np.random.SeedSequence(entropy).generate_state(1, np.uint64)[0]
        self.generator.manual_seed(int(state))

    def _start(self, mask: torch.Tensor) -> None:
        """``MujocoEnv.reset`` for the copies in ``mask``: start states drawn for every copy
        (one draw, no host sync) and kept in the masked rows.

        Of what ``mj_resetData`` clears, these models (no activations, mocap bodies,
        equality constraints, sensors or applied forces) carry from one step to the next
        only the solver's warm start (and the time): those are cleared here, in torch,
        rather than by ``mjw.reset_data``, which costs more than a step of 8 copies on
        Warp's CPU backend (7 ms against 5.5 ms, measured on the loaded 2-core machine)."""
        shape = (self.num_envs, self.init_qpos.shape[0])
        noise = self.noise * (2 * torch.rand(shape, generator=self.generator, **self._f32) - 1)
        qpos = self.init_qpos + noise
        shape = (self.num_envs, self.init_qvel.shape[0])
        if self.task is HalfCheetahEnv:
            draw = torch.randn(shape, generator=self.generator, **self._f32)
        else:
            draw = 2 * torch.rand(shape, generator=self.generator, **self._f32) - 1
        qvel = self.init_qvel + self.noise * draw
        rows = mask[:, None]
        self.qpos.copy_(torch.where(rows, qpos, self.qpos))
        self.qvel.copy_(torch.where(rows, qvel, self.qvel))
        self.qacc_warmstart.masked_fill_(rows, 0.0)
        self.time.masked_fill_(mask, 0.0)
        self._elapsed.masked_fill_(mask, 0)

    def _physics(self) -> None:
        """The ``frame_skip`` MuJoCo steps of one env step. One ``mjw.step`` is hundreds of
        small kernels: launched one by one from Python, 100 HalfCheetah worlds step at ~3 k
        env-steps/s on an H200, replayed as one CUDA graph at ~68 k (``benchmarks/
        warp_envs.py``, docs/speed.md). So on a CUDA device the physics is captured once, on
        Warp's own stream (a graph cannot be captured on torch's default stream), and
        replayed on torch's current stream: the graph reads and writes the state arrays in
        place (``ctrl`` before it, ``qpos``/``qvel`` after it), whose addresses never change."""
        wp = self._wp
        if not self.use_graph:
            with self._scope():
                self._mujoco_steps()
            return
        if self._graph is None:
            torch.cuda.current_stream(self.device).synchronize()  # the state as torch left it
            with wp.ScopedDevice(self.wp_device), wp.ScopedCapture() as capture:
                self._mujoco_steps()
            self._graph = capture.graph
        with self._scope():
            wp.capture_launch(self._graph)

    def _mujoco_steps(self) -> None:
        for _ in range(self.frame_skip):
            self._mjw.step(self.model, self.data)

    def _scope(self) -> Any:
        """Where Warp launches: on a CUDA device, on torch's current stream there (made a
        Warp stream once per torch stream), so that torch's reads and writes of the shared
        arrays and Warp's kernels keep their order without a sync."""
        if not self.wp_device.is_cuda:
            return self._wp.ScopedDevice(self.wp_device)
        current = torch.cuda.current_stream(self.device)
        if self._stream is None or self._stream._torch_stream != current:
            self._stream = self._wp.stream_from_torch(current)
        return self._wp.ScopedStream(self._stream, sync_enter=False)

    @property
    def _f32(self) -> dict[str, Any]:
        return {"dtype": torch.float32, "device": self.device}

    def _observe(self) -> torch.Tensor:
        velocity = self.qvel if self.task is HalfCheetahEnv else self.qvel.clip(-10, 10)
        return torch.cat([self.qpos[:, self.first :], velocity], dim=1)

    def _healthy(self) -> torch.Tensor:
        """Hopper's ``is_healthy``: z, angle and the state strictly inside their ranges."""
        z, angle = self.qpos[:, 1], self.qpos[:, 2]
        low, high = self.state_range
        state = torch.cat([self.qpos, self.qvel], dim=1)[:, 2:]
        healthy = ((low < state) & (state < high)).all(dim=1)
        healthy &= (self.z_range[0] < z) & (z < self.z_range[1])
        return healthy & (self.angle_range[0] < angle) & (angle < self.angle_range[1])


def warp_locomotion(
    single_env: gym.Env, num_envs: int, max_episode_steps: int | None, device: str
) -> WarpLocomotion | None:
    """The Warp env for a single ``HalfCheetah-v4`` or ``Hopper-v4``, or None for one it does
    not model (a render mode, or a subclass with its own rules)."""
    env = single_env.unwrapped
    if type(env) not in (HalfCheetahEnv, HopperEnv) or env.render_mode is not None:
        return None
    return WarpLocomotion(single_env, num_envs, max_episode_steps, device)

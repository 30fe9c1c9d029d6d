"""gymnasium's ``HalfCheetah-v4`` and ``Hopper-v4`` for N copies in MuJoCo Warp: the vector env
that keeps a MuJoCo task's step on the device of a run on a GPU.

MuJoCo Warp (``mujoco_warp``, the optional extra ``pip install 'param-explore[gpu]'``, pinned to
the release of the installed ``mujoco``) steps N worlds of one model as Warp kernels, on a CUDA
device or on Warp's CPU backend (a correctness path: its kernels compile once, then are cached
in Warp's kernel cache, ``WARP_CACHE_PATH``). Its state arrays are handed to torch with
``warp.to_torch``, which shares their memory: ``qpos``, ``qvel``, ``ctrl`` and
``qacc_warmstart`` are (N, …) float32 tensors on the env's device that are Warp's arrays, and
the task's arithmetic (rewards, terminations, observations, the autoreset's start states) is
torch code on them. Its two faces — :meth:`~.DeviceVectorEnv.step_tensors` on the device and the
numpy contract beside it — the time limit and the seeding are
:class:`~.device_vector_env.DeviceVectorEnv`'s.

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

from typing import Any

import gymnasium as gym
import numpy as np
import torch
from gymnasium.envs.mujoco.half_cheetah_v4 import HalfCheetahEnv
from gymnasium.envs.mujoco.hopper_v4 import HopperEnv

from .device_vector_env import DeviceVectorEnv


def load_mujoco_warp() -> tuple[Any, Any]:
    """``(warp, mujoco_warp)``, imported on first use, Warp's per-kernel log lines off
    (:func:`agents.common.vector_envs.make_vector_env` says first, in one line, when the
    extra is missing)."""
    import mujoco_warp
    import warp

    warp.config.quiet = True
    warp.config.log_level = warp.LOG_WARNING
    return warp, mujoco_warp


class WarpLocomotion(DeviceVectorEnv):
    """N copies of ``HalfCheetah-v4`` or ``Hopper-v4`` in one MuJoCo Warp ``Data`` on ``device``
    (a Warp device name: ``cuda``, ``cuda:1``, ``cpu``)."""

    def __init__(
        self, single_env: gym.Env, num_envs: int, max_episode_steps: int | None, device: str
    ) -> None:
        wp, mjw = load_mujoco_warp()
        env = single_env.unwrapped
        self._wp, self._mjw = wp, mjw
        self.wp_device = wp.get_device(device)
        torch_device = torch.device(wp.device_to_torch(self.wp_device))
        super().__init__(single_env, num_envs, max_episode_steps, torch_device)
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
        self.entry_dtypes = {
            "x_position": np.float64,
            "x_velocity": np.float64,
            **(
                {"reward_run": np.float64, "reward_ctrl": self.single_action_space.dtype}
                if self.task is HalfCheetahEnv
                else {}
            ),
        }

    # -------------------------------------------------------------------- the task
    def _advance(
        self, actions: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
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
        return rewards, terminated, entries

    def close_extras(self, **kwargs) -> None:
        self.model = self.data = None  # the worlds' device memory

    # ------------------------------------------------------------------------ internals
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

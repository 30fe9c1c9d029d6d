"""A gymnasium MuJoCo env's N copies in one MuJoCo Warp ``Data`` on a device: the simulator part
of every MuJoCo task that steps on a torch device (:mod:`.warp_locomotion`, :mod:`.warp_sparse`),
as :mod:`.mujoco_batch` is for the tasks that step on the host.

MuJoCo Warp (``mujoco_warp``, the optional extra ``pip install 'param-explore[gpu]'``, pinned to
the release of the installed ``mujoco``) steps N worlds of one model as Warp kernels, on a CUDA
device or on Warp's CPU backend (a correctness path: its kernels compile once, then are cached
in Warp's kernel cache, ``WARP_CACHE_PATH``). Its state arrays are handed to torch with
``warp.to_torch``, which shares their memory: ``qpos``, ``qvel``, ``ctrl``, ``time``,
``qacc_warmstart`` (and ``subtree_com`` for a task that reads it) are (N, …) float32 tensors on
the env's device that are Warp's arrays, and a task's arithmetic is torch code on them. Its two
faces, the time limit, the autoreset and the seeding are
:class:`~.device_vector_env.DeviceVectorEnv`'s.

This class does what ``MujocoEnv`` does around a task's own step: ``set_state`` for the copies
that start (of what ``mj_resetData`` clears, these models carry to the next step only the
solver's warm start and the time: those are cleared, in torch, rather than by
``mjw.reset_data``, which costs more than a step of 8 copies on Warp's CPU backend — 7 ms
against 5.5 ms, measured on the loaded 2-core machine; ``mj_forward``'s results nothing reads
before the next step recomputes them, but the positions' stage a task asks for), and
``do_simulation`` (``ctrl``, then ``frame_skip`` steps, each followed by an optional
correction: the Box2D tasks' rotation limit, :class:`.box2d.RotationLimit`).

MuJoCo Warp computes in float32 where MuJoCo computes in float64: its documentation says its
results differ from MuJoCo's for that reason (and that its solver tolerance is raised to 1e-6
for it), so a Warp env equals its gymnasium env to a tolerance (``tests/test_vector_envs.py``
justifies it), not to 1e-12 as the ``mujoco.batch`` envs do; on a GPU MuJoCo Warp is not
deterministic either (atomic operations), Warp's CPU backend is.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gymnasium as gym
import torch

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


class WarpBatchEnv(DeviceVectorEnv):
    """N copies of ``single_env``'s model (a gymnasium ``MujocoEnv``), its ``frame_skip``,
    ``init_qpos`` and ``init_qvel``, in MuJoCo Warp on ``device`` (a Warp device name:
    ``cuda``, ``cuda:1``, ``cpu``); subclasses give the task (``DeviceVectorEnv``'s
    methods)."""

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
        #: on a CUDA device, each launch of kernels a step makes as a CUDA graph (captured at
        #: its first call; ``False``: launched kernel by kernel, what the equality test compares)
        self.use_graph = self.wp_device.is_cuda
        self._graphs: dict[str, Any] = {}
        with self._scope():
            self.model = mjw.put_model(env.model)
            self.data = mjw.make_data(env.model, nworld=num_envs)
        wp.synchronize_device(self.wp_device)
        self.qpos, self.qvel = wp.to_torch(self.data.qpos), wp.to_torch(self.data.qvel)
        self.ctrl, self.time = wp.to_torch(self.data.ctrl), wp.to_torch(self.data.time)
        self.qacc_warmstart = wp.to_torch(self.data.qacc_warmstart)
        self.frame_skip, self.dt = env.frame_skip, env.dt
        self.init_qpos = torch.as_tensor(env.init_qpos, **self._f32)
        self.init_qvel = torch.as_tensor(env.init_qvel, **self._f32)
        #: qvel → qvel after every MuJoCo step (None: plain steps)
        self.substep: Callable[[torch.Tensor], torch.Tensor] | None = None

    def set_state(self, mask: torch.Tensor, qpos: torch.Tensor, qvel: torch.Tensor) -> None:
        """The copies of ``mask`` started at (qpos, qvel), (N, nq) and (N, nv) drawn for
        every copy (no host sync): ``MujocoEnv.reset`` then ``set_state`` (module docstring)."""
        rows = mask[:, None]
        self.qpos.copy_(torch.where(rows, qpos, self.qpos))
        self.qvel.copy_(torch.where(rows, qvel, self.qvel))
        self.qacc_warmstart.masked_fill_(rows, 0.0)
        self.time.masked_fill_(mask, 0.0)

    def simulate(self, actions: torch.Tensor) -> None:
        """``do_simulation`` for every copy: ``ctrl``, then the ``frame_skip`` steps."""
        self.ctrl.copy_(actions)
        self._physics()

    def positions(self) -> None:
        """The forward positions' stage at the current state (``mj_kinematics``,
        ``mj_comPos``: the bodies' frames, the subtree centres of mass)."""
        self._launch("positions", self._position_kernels)

    def close_extras(self, **kwargs) -> None:
        self.model = self.data = None  # the worlds' device memory

    # ------------------------------------------------------------------------ internals
    def _physics(self) -> None:
        """The ``frame_skip`` MuJoCo steps of one env step: one graph of them all, or, with
        a correction after each, one graph a step with the correction (torch) between."""
        if self.substep is None:
            self._launch("step", self._mujoco_steps)
            return
        for _ in range(self.frame_skip):
            self._launch("substep", self._mujoco_step)
            self.qvel.copy_(self.substep(self.qvel))

    def _launch(self, name: str, kernels: Callable[[], None]) -> None:
        """``kernels`` (Warp launches on the state arrays). One ``mjw.step`` is hundreds of
        small kernels: launched one by one from Python, 100 HalfCheetah worlds step at ~3 k
        env-steps/s on an H200, replayed as one CUDA graph at ~68 k (``benchmarks/
        warp_envs.py``, docs/speed.md). So on a CUDA device each is captured once, on Warp's
        own stream (a graph cannot be captured on torch's default stream), and replayed on
        torch's current stream: the graph reads and writes the state arrays in place, whose
        addresses never change."""
        wp = self._wp
        if not self.use_graph:
            with self._scope():
                kernels()
            return
        graph = self._graphs.get(name)
        if graph is None:
            torch.cuda.current_stream(self.device).synchronize()  # the state as torch left it
            with wp.ScopedDevice(self.wp_device), wp.ScopedCapture() as capture:
                kernels()
            graph = self._graphs[name] = capture.graph
        with self._scope():
            wp.capture_launch(graph)

    def _mujoco_steps(self) -> None:
        for _ in range(self.frame_skip):
            self._mjw.step(self.model, self.data)

    def _mujoco_step(self) -> None:
        self._mjw.step(self.model, self.data)

    def _position_kernels(self) -> None:
        self._mjw.kinematics(self.model, self.data)
        self._mjw.com_pos(self.model, self.data)

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

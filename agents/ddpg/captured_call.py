"""A compiled graph replayed from a CUDA graph — the update, the members' acting: one launch
for all its kernels.

Why: on a GPU, a population's compiled update of small networks is a few dozen kernels, and
launching them one by one from the host costs time the device spends idle (LeanRL's
``CudaGraphModule`` and FastTD3's ``reduce-overhead`` compile capture theirs for this).
A CUDA graph records the kernels once and replays them with one launch.

What makes the update capturable: it reads nothing back and sends nothing to the device
(its numbers are computed inside the graph from step counts on the device,
:mod:`agents.ddpg.compiled_update`), draws no random number, and every tensor it reads or
writes but the minibatch lives at a fixed address (the members' stacked state, updated in
place). The minibatch — new tensors every step — is copied into buffers of its own. The
members' acting (:class:`agents.ddpg.batched_acting.BatchedActing`) is the same: the stacked state
and the step's ε at fixed addresses, the observations copied in; its output, the actions, is
the tensor the capture allocated, written again by every replay (read before the next call).

How: the first ``warmup`` calls run the function directly (on a side stream, as
``torch.cuda.graph`` requires of work before a capture); the next call captures it and
replays the capture; every later call copies its minibatch into the buffers and replays.
Each call is one update, the captured one included (a capture records and does not run).
On a device without CUDA graphs (the CPU) every call makes the same copies and calls the
same function: the kernels a capture would record, so the CPU's tests run this path too.

Not a setting yet: ``benchmarks/device_step.py --cuda-graph`` measures whether it pays on a
lent GPU (``benchmarks/gpu_check.sh``); until then a run's update and acting call their
functions.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch import Tensor


class CapturedCall:
    """``function(*fixed, *batch)`` called with ``batch`` copied into buffers of its own,
    replayed from a CUDA graph after ``warmup`` direct calls on a CUDA device (module
    docstring)."""

    def __init__(
        self,
        function: Callable[..., object],
        fixed: Sequence[Tensor],
        batch: Sequence[Tensor],
        warmup: int = 2,
    ) -> None:
        """``fixed``: the tensors every call reads at the same address; ``batch``: an
        example minibatch (its buffers take its shapes, dtypes and device)."""
        self._function = function
        self._fixed = list(fixed)
        self._buffers = [torch.empty_like(x) for x in batch]
        self._cuda = self._buffers[0].device.type == "cuda"
        self._warmup = warmup
        self._graph: torch.cuda.CUDAGraph | None = None
        self._output: object = None  # what the captured call returned
        #: Calls so far (the warm-up ones, the capture and the replays).
        self.calls = 0

    @property
    def captured(self) -> bool:
        """Whether later calls replay a CUDA graph."""
        return self._graph is not None

    def __call__(self, batch: Sequence[Tensor]) -> object:
        """One call on ``batch``; what the function returns (from a replay: the captured
        call's output tensors, written again by each replay)."""
        for buffer, x in zip(self._buffers, batch, strict=True):
            buffer.copy_(x)
        self.calls += 1
        if self._graph is not None:
            self._graph.replay()
            return self._output
        if not self._cuda:
            return self._function(*self._fixed, *self._buffers)
        if self.calls <= self._warmup:
            return self._on_side_stream()
        self._graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self._graph):
            self._output = self._function(*self._fixed, *self._buffers)
        self._graph.replay()
        return self._output

    def _on_side_stream(self) -> object:
        """One direct call on a side stream, ordered after and before the current one's work."""
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            output = self._function(*self._fixed, *self._buffers)
        torch.cuda.current_stream().wait_stream(stream)
        return output

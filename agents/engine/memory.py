"""What a DDPG configuration needs in memory, checked before anything is allocated.

A batch or buffer too large for the machine otherwise fails late and badly: the replay
buffer's pages are touched one transition at a time (a run dies hours in), and a minibatch
of 10⁸ transitions grows a process until the kernel's OOM killer ends it, and with it
whatever else the machine runs. :func:`check_memory` refuses such settings first, with the
estimate in the message.

The estimate is a *lower* bound, so that no setting that fits is refused: the replay
buffer's tensors exactly (two observations, the action, reward and flag per transition, as
float32), four copies of the networks' parameters (networks, targets, two optimizer
moments), and per update the activations autograd must keep for a minibatch — every layer
of the critic twice (its loss, and the actor's loss through it) and of the actor once, as
float32. Temporaries, the allocator's slack and the interpreter come on top.
"""

from __future__ import annotations

import os
from itertools import pairwise
from pathlib import Path

import torch

from ..errors import ConfigError
from .config import DDPGConfig

_FLOAT = 4  # bytes per float32
#: The setting to lower when a part is the largest.
_SETTING = {"buffer": "buffer_size", "networks": "hidden_sizes", "update": "batch_size"}


def memory_needed(config: DDPGConfig, obs_dim: int, action_dim: int) -> dict[str, int]:
    """Bytes the run needs at least: ``buffer``, ``networks``, ``update`` (module docstring)."""
    hidden = list(config.hidden_sizes)
    actor_layers = [obs_dim, *hidden, action_dim]
    critic_layers = [obs_dim + action_dim, *hidden, 1]
    params = sum(
        (a + 1) * b for layers in (actor_layers, critic_layers) for a, b in pairwise(layers)
    )
    per_transition = 2 * obs_dim + action_dim + 2
    per_sample = 2 * sum(critic_layers) + sum(actor_layers)
    return {
        "buffer": config.buffer_size * per_transition * _FLOAT,
        "networks": 4 * params * _FLOAT,
        "update": config.batch_size * per_sample * _FLOAT,
    }


def available_memory(device: torch.device) -> int | None:
    """Bytes the process may still allocate on ``device`` (None when unknown): free CUDA
    memory, or the smaller of the system's available memory and a cgroup's remaining
    limit (a container's OOM killer acts on the latter)."""
    if device.type == "cuda":
        return torch.cuda.mem_get_info(device)[0]
    limits = [_meminfo_available(), _cgroup_remaining()]
    known = [limit for limit in limits if limit is not None]
    return min(known) if known else None


def check_memory(config: DDPGConfig, obs_dim: int, action_dim: int, device: torch.device) -> None:
    """ConfigError, with the estimate, when ``config`` cannot fit on ``device``."""
    need = memory_needed(config, obs_dim, action_dim)
    available = available_memory(device)
    if available is None or sum(need.values()) <= available:
        return
    parts = {
        "buffer": f"replay buffer (buffer_size={config.buffer_size}) {_size(need['buffer'])}",
        "networks": f"networks (hidden_sizes={list(config.hidden_sizes)}) "
        f"{_size(need['networks'])}",
        "update": f"one update (batch_size={config.batch_size}) {_size(need['update'])}",
    }
    largest = max(need, key=need.get)
    detail = ", ".join(parts[name] for name in sorted(need, key=need.get, reverse=True))
    raise ConfigError(
        f"these settings need at least {_size(sum(need.values()))} of memory ({detail}), "
        f"more than the {_size(available)} available on {device.type}; lower "
        f"{_SETTING[largest]}"
    )


def _size(nbytes: int) -> str:
    for unit in ("B", "kB", "MB", "GB", "TB", "PB"):
        if nbytes < 1000 or unit == "PB":
            return f"{nbytes:.0f} {unit}" if unit == "B" else f"{nbytes:.1f} {unit}"
        nbytes /= 1000
    raise AssertionError


def _meminfo_available() -> int | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def _cgroup_remaining() -> int | None:
    """cgroup v2's ``memory.max`` minus ``memory.current`` (None without a limit)."""
    root = Path("/sys/fs/cgroup")
    try:
        limit = (root / "memory.max").read_text().strip()
        if limit == "max":
            return None
        return int(limit) - int((root / "memory.current").read_text().strip())
    except (OSError, ValueError):
        return None

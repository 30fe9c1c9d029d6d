"""The memory a run's settings need, checked against the machine before anything is
allocated.

A batch or buffer too large for the machine otherwise fails late and badly: the replay
buffer's pages are touched one transition at a time (a run dies hours in), and a minibatch
of 10⁸ transitions grows a process until the kernel's OOM killer ends it, and with it
whatever else the machine runs. Each learner states what its settings need as
:class:`MemoryNeed` parts (``DDPGSettings.memory_needs``), and :func:`check_memory`
refuses settings that cannot fit, with the estimate part by part in the message.

Every part is a *lower* bound, so that no setting that fits is refused; temporaries, the
allocator's slack and the interpreter come on top.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from .errors import ConfigError

FLOAT32 = 4  # bytes


@dataclass(frozen=True)
class MemoryNeed:
    """One part of what a run needs: what it is (with the setting that sizes it), its
    bytes at least, and the setting to lower when it is the largest part."""

    what: str
    nbytes: int
    setting: str


def available_memory(device: torch.device) -> int | None:
    """Bytes the process may still allocate on ``device`` (None when unknown): free CUDA
    memory, or the smaller of the system's available memory and a cgroup's remaining
    limit (a container's OOM killer acts on the latter)."""
    if device.type == "cuda":
        return torch.cuda.mem_get_info(device)[0]
    limits = [_meminfo_available(), _cgroup_remaining()]
    known = [limit for limit in limits if limit is not None]
    return min(known) if known else None


def check_memory(needs: Sequence[MemoryNeed], device: torch.device) -> None:
    """ConfigError, with the estimate part by part, when ``needs`` cannot fit on ``device``."""
    total = sum(need.nbytes for need in needs)
    available = available_memory(device)
    if available is None or total <= available:
        return
    ordered = sorted(needs, key=lambda need: need.nbytes, reverse=True)
    # A population's members need the same parts: each part once, with how many need it
    # (the line of 1 000 members stays one readable line).
    counts = Counter((need.what, need.nbytes) for need in ordered)
    detail = ", ".join(
        (f"{n} × " if n > 1 else "") + f"{what} {_size(nbytes)}"
        for (what, nbytes), n in counts.items()
    )
    raise ConfigError(
        f"these settings need at least {_size(total)} of memory ({detail}), "
        f"more than the {_size(available)} available on {device.type}; lower "
        f"{ordered[0].setting}"
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

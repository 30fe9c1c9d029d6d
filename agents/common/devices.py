"""The training device a run names (``--device auto|cpu|cuda|cuda:N``), checked and resolved
once: a string torch would not parse, or a GPU this machine does not have, is one line
before anything is built, not torch's traceback at the first tensor."""

from __future__ import annotations

import torch

from .errors import ConfigError

#: What a run's ``device`` may say.
DEVICES = "auto, cpu, cuda or cuda:N (N a GPU's index)"


def check_device(device: str) -> None:
    """``device`` is ``auto`` or a device torch parses of type cpu or cuda (a settings
    check: whether it exists is :func:`resolve_device`'s, on the machine that trains)."""
    if device == "auto":
        return
    try:
        parsed = torch.device(device)
    except (RuntimeError, TypeError):
        parsed = None
    if parsed is None or parsed.type not in ("cpu", "cuda") or str(parsed) != device:
        raise ConfigError(f"device must be {DEVICES}, got {device!r}")


def resolve_device(device: str | torch.device) -> torch.device:
    """``auto`` → cuda when available, else cpu; a cuda device this machine does not have is
    refused."""
    if str(device) == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    check_device(str(device))
    device = torch.device(device)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ConfigError(f"device {device} was requested but no CUDA device is available")
    count = torch.cuda.device_count() if device.type == "cuda" else 0
    if device.index is not None and device.type == "cuda" and device.index >= count:
        raise ConfigError(
            f"device {device} does not exist: this machine has {count} CUDA device(s), "
            f"cuda:0 to cuda:{count - 1}"
        )
    return device

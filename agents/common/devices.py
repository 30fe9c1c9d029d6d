"""The training device a run names (``--device auto|cpu|cuda``), resolved once."""

from __future__ import annotations

import torch

from .errors import ConfigError


def resolve_device(device: str | torch.device) -> torch.device:
    """``auto`` → cuda when available, else cpu; cuda without a device is refused."""
    if str(device) == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    device = torch.device(device)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ConfigError("device cuda was requested but no CUDA device is available")
    return device

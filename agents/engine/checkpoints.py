"""Writing files atomically, and reading native checkpoints as data only.

A checkpoint is data, never code: :func:`read_checkpoint` loads with
``torch.load(weights_only=True)``, whose unpickler accepts tensors and plain Python types
(dicts, lists, numbers, strings) and refuses everything else before anything runs. What an
agent saves is exactly that (``DDPG.state_dict``). Every problem becomes a
:class:`CheckpointError` naming the file: a damaged file, another engine's file, a file that
would need code to load.
"""

from __future__ import annotations

import pickle
import re
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch

from ..errors import CheckpointError

#: Keys every native checkpoint has (``DDPG.state_dict``).
NATIVE_KEYS = ("config", "env_id", "actor", "critic", "actor_optimizer", "counters")


@contextmanager
def atomic_write(path: str | Path) -> Iterator[Path]:
    """A temporary path beside ``path`` (same suffix) to write to; on success it replaces
    ``path`` in one rename, so a crash never leaves half a file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"tmp-{path.name}")
    try:
        yield tmp
        tmp.replace(path)
    finally:
        tmp.unlink(missing_ok=True)


def read_checkpoint(path: str | Path, map_location: str | torch.device = "cpu") -> dict[str, Any]:
    """The state saved by ``DDPG.save``, loaded as data only; CheckpointError otherwise."""
    path = Path(path)
    try:
        state = torch.load(path, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError as err:
        found = re.search(r"Unsupported global: GLOBAL (\S+)", str(err))
        what = f" ({found.group(1)})" if found else ""
        raise CheckpointError(
            f"checkpoint {path} refused: it holds objects other than tensors and plain "
            f"data{what}, and loading them could run code"
        ) from None
    except FileNotFoundError:
        raise CheckpointError(f"checkpoint {path} does not exist") from None
    except (RuntimeError, EOFError, OSError, ValueError) as err:
        if _is_sb3_zip(path):
            raise CheckpointError(
                f"{path} is not a checkpoint of the native engine (it is an SB3 model zip)"
            ) from None
        first_line = str(err).strip().splitlines()[0][:200] if str(err).strip() else ""
        raise CheckpointError(f"checkpoint {path} is damaged: {first_line}") from None
    if not isinstance(state, dict) or not all(key in state for key in NATIVE_KEYS):
        raise CheckpointError(f"{path} is not a checkpoint of the native engine")
    return state


def _is_sb3_zip(path: Path) -> bool:
    try:
        with zipfile.ZipFile(path) as archive:
            return {"data", "policy.pth"} <= set(archive.namelist())
    except (zipfile.BadZipFile, OSError):
        return False

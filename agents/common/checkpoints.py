"""Writing files atomically, and checkpoints as data only, for both engines.

A checkpoint is data, never code: :func:`read_checkpoint` loads with
``torch.load(weights_only=True)``, whose unpickler accepts tensors and plain Python types
(dicts, lists, numbers, strings) and refuses everything else before anything runs. What an
agent saves is exactly that (``DDPG.state_dict``, ``SB3Agent.state_dict``), with the
engine that wrote it under ``engine`` (absent in native checkpoints of earlier versions).
Every problem becomes a :class:`CheckpointError` naming the file and saying what is wrong:
empty, truncated, not a checkpoint at all, another engine's, a file that would need code
to load, weights that are not finite, counters that are not counts.

A file that would run code is found before torch reads it, from the pickle's own
instructions (:func:`code_in_pickle`): torch's refusal words it differently from release
to release, and since 2.6 opens with advice to load again with ``weights_only=False`` —
which would run the code. Its message is never shown.
"""

from __future__ import annotations

import math
import os
import pickle
import pickletools
import re
import warnings
import zipfile
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch

from .errors import CheckpointError, NonFiniteDataError

#: Keys every checkpoint has, per engine (``DDPG.state_dict``, ``SB3Agent.state_dict``,
#: ``SB3TRPOAgent.state_dict``).
REQUIRED_KEYS = {
    "native": ("config", "env_id", "actor", "critic", "actor_optimizer", "counters"),
    "sb3": ("config", "env_id", "policy", "actor_optimizer", "critic_optimizer", "counters"),
    "sb3-trpo": ("config", "env_id", "policy", "optimizer", "counters"),
}
#: The parts of each engine's checkpoint that must be finite to be saved or trusted: the
#: networks and their optimizers (a curiosity bonus's state has checks of its own,
#: ``agents/curiosity/vime.py``). A run never saves them otherwise (:func:`save_finite`),
#: so a file where they are not finite was changed, and is refused before it loads.
FINITE_KEYS = {
    "native": (
        "actor",
        "critic",
        "target_actor",
        "target_critic",
        "actor_optimizer",
        "critic_optimizer",
    ),
    "sb3": ("policy", "actor_optimizer", "critic_optimizer"),
    "sb3-trpo": ("policy", "optimizer"),
}
#: The local-file header every zip archive, hence every ``torch.save`` file, starts with.
_ZIP_MAGIC = b"PK\x03\x04"


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


def write_checkpoint(state: Mapping[str, Any], path: str | Path) -> None:
    """``torch.save(state)`` to ``path`` atomically and durably (flushed to the disk before
    the rename). Through a Python file, so that a full disk is an ``OSError`` (ENOSPC)
    rather than torch's ``unexpected pos`` from its own writer. A tensor that is a view of
    a larger one (a population's member's slice of its stacked tensors) is saved as itself,
    not with the storage it shares."""
    with atomic_write(path) as tmp, open(tmp, "wb") as f:
        torch.save(_compact(dict(state)), f)
        f.flush()
        os.fsync(f.fileno())


def _compact(value: Any) -> Any:
    """``value`` with every tensor that views a larger storage replaced by a copy of its
    own elements (``torch.save`` writes a view's whole storage)."""
    if torch.is_tensor(value):
        shared = value.untyped_storage().nbytes() > value.numel() * value.element_size()
        return value.clone() if shared else value
    if isinstance(value, Mapping):
        return {key: _compact(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        items = [_compact(item) for item in value]
        return type(value)(*items) if hasattr(value, "_fields") else type(value)(items)
    return value


def read_checkpoint(
    path: str | Path, map_location: str | torch.device = "cpu", engine: str = "native"
) -> dict[str, Any]:
    """The state saved by an agent of ``engine``, loaded as data only; CheckpointError
    (naming the file and the reason) otherwise."""
    path = Path(path)
    _check_archive(path)
    if _is_sb3_zip(path):
        raise CheckpointError(
            f"{path} is not a checkpoint of the {engine} engine (it is an SB3 model zip)"
        )
    _refuse_code(path)
    try:
        with warnings.catch_warnings():  # e.g. on another pickle protocol: the line says it
            warnings.simplefilter("ignore", UserWarning)
            state = torch.load(path, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError:  # no code (above), but not data as torch reads it
        raise CheckpointError(
            f"checkpoint {path} refused: its pickle uses instructions that torch's loader "
            "for tensors and plain data does not take"
        ) from None
    except (RuntimeError, EOFError, OSError, ValueError, KeyError, zipfile.BadZipFile) as err:
        raise CheckpointError(f"checkpoint {path} is damaged: {_first_line(err)}") from None
    if not isinstance(state, dict) or not all(key in state for key in REQUIRED_KEYS[engine]):
        saved = state.get("engine") if isinstance(state, dict) else None
        other = f" (it is one of the {saved} engine)" if saved and saved != engine else ""
        raise CheckpointError(f"{path} is not a checkpoint of the {engine} engine{other}")
    saved = state.get("engine", "native")
    if saved != engine:
        raise CheckpointError(
            f"{path} is not a checkpoint of the {engine} engine (it is one of the {saved} engine)"
        )
    bad = non_finite_entries({key: state[key] for key in FINITE_KEYS[engine] if key in state})
    if bad:
        raise CheckpointError(
            f"checkpoint {path} refused: its weights or optimizer state are not finite "
            f"({listed(bad)}); a run never saves such a state, so the file was changed"
        )
    _check_counters(state["counters"], path)
    return state


def _check_counters(counters: Any, path: Path) -> None:
    """Every counter of a checkpoint (steps, updates, episodes, skipped updates) is a count:
    an integer >= 0. A resume trusts them before anything else — the step it continues
    from decides which of ``eval.csv``'s evaluations it keeps — so a file whose counters
    are not counts (``'200'``, ``-100``) was changed, and is refused as it is read, with
    the run directory as it was."""
    if not isinstance(counters, Mapping):
        raise CheckpointError(
            f"checkpoint {path} refused: its counters are {type(counters).__name__}, not a "
            "mapping of counts; a run never saves such a file, so it was changed"
        )
    for name, value in counters.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise CheckpointError(
                f"checkpoint {path} refused: its counter {name} is {value!r}, not a count "
                "(an integer >= 0); a run never saves such a value, so the file was changed"
            )


def _check_archive(path: Path) -> None:
    """What is wrong with a file that cannot be a checkpoint, before torch reads it."""
    try:
        size = path.stat().st_size
        with open(path, "rb") as f:
            head = f.read(len(_ZIP_MAGIC))
    except FileNotFoundError:
        raise CheckpointError(f"checkpoint {path} does not exist") from None
    except IsADirectoryError:
        raise CheckpointError(f"checkpoint {path} is a directory, not a file") from None
    except OSError as err:
        raise CheckpointError(f"cannot read checkpoint {path}: {err.strerror}") from None
    if size == 0:
        raise CheckpointError(f"checkpoint {path} is damaged: the file is empty")
    if zipfile.is_zipfile(path):
        return
    if head == _ZIP_MAGIC:
        raise CheckpointError(
            f"checkpoint {path} is damaged: it is truncated ({size} bytes, the end of the "
            "archive is missing)"
        )
    raise CheckpointError(
        f"checkpoint {path} is damaged: it is not a checkpoint archive (a checkpoint is a "
        "zip archive; this file holds something else)"
    )


#: ``torch.Size([4, 3])`` as ``[4, 3]``.
_SHAPE = re.compile(r"torch\.Size\(\[([^\]]*)\]\)")


def _first_line(err: BaseException) -> str:
    text = str(err).strip()
    if "weights_only" in text:  # torch's advice to load in a way that runs code
        return "torch cannot load it as tensors and plain data"
    return text.splitlines()[0][:200] if text else type(err).__name__


def _refuse_code(path: Path) -> None:
    """CheckpointError if the archive's pickle names anything torch's loader for data does
    not take, or cannot be read as a pickle; nothing of it is run."""
    try:
        with zipfile.ZipFile(path) as archive:
            names = [n for n in archive.namelist() if n.rpartition("/")[2] == "data.pkl"]
            if len(names) != 1:
                return  # not torch's layout: torch.load says what is wrong
            data = archive.read(names[0])
    except (zipfile.BadZipFile, OSError, RuntimeError, EOFError, ValueError) as err:
        raise CheckpointError(f"checkpoint {path} is damaged: {_first_line(err)}") from None
    try:
        code = code_in_pickle(data)
    except ValueError as err:
        raise CheckpointError(f"checkpoint {path} is damaged: not a pickle ({err})") from None
    if code:
        raise CheckpointError(
            f"checkpoint {path} refused: it holds objects other than tensors and plain data "
            f"({listed(code)}), and loading it would run code; it was not loaded"
        )


def code_in_pickle(data: bytes) -> list[str]:
    """The callables and classes that unpickling ``data`` would look up (``module.name``)
    and torch's loader for data does not take, read from the pickle's instructions
    without running any.

    A pickle runs code only through a global it looks up (GLOBAL; STACK_GLOBAL, INST and
    the extension registry's EXT*) and then calls (REDUCE, NEWOBJ, OBJ, BUILD), so the
    globals tell. STACK_GLOBAL takes its names from the stack: the strings pushed just
    before it, directly or from the memo; one whose names are not such strings is listed
    as unresolved. ValueError for bytes that are not a pickle.
    """
    allowed = _torch_data_globals()
    found: list[str] = []
    memo: dict[int, object] = {}
    pushed: list[object] = []  # the values pushed since the last other instruction
    for opcode, arg, _ in pickletools.genops(data):
        name = opcode.name
        if name in ("GLOBAL", "INST"):
            found.append(str(arg).replace(" ", ".", 1))
        elif name == "STACK_GLOBAL":
            module, attr = [None, None, *pushed][-2:]
            resolved = isinstance(module, str) and isinstance(attr, str)
            found.append(f"{module}.{attr}" if resolved else "a global of unresolved name")
        elif name.startswith("EXT"):
            found.append(f"extension code {arg}")
        if name in ("MEMOIZE", "PUT", "BINPUT", "LONG_BINPUT"):
            memo[len(memo) if name == "MEMOIZE" else int(arg)] = pushed[-1] if pushed else None
        elif name in ("GET", "BINGET", "LONG_BINGET"):
            pushed.append(memo.get(int(arg)))
        elif isinstance(arg, str) and ("UNICODE" in name or "STRING" in name):
            pushed.append(arg)
        elif name not in ("FRAME", "PROTO"):
            pushed = []
    return sorted({g for g in found if allowed is None or g not in allowed})


def _torch_data_globals() -> set[str] | None:
    """What torch's ``weights_only`` loader takes (its defaults and any added with
    ``torch.serialization.add_safe_globals``); None where this torch does not say, and
    then every global is listed (torch's loader refuses them anyway)."""
    try:
        from torch import _weights_only_unpickler as unpickler

        allowed = set(unpickler._get_allowed_globals())
        user = getattr(unpickler, "_get_user_allowed_globals", None)
        return allowed | set(user()) if user is not None else allowed
    except (ImportError, AttributeError, TypeError):
        return None


def _is_sb3_zip(path: Path) -> bool:
    try:
        with zipfile.ZipFile(path) as archive:
            return {"data", "policy.pth"} <= set(archive.namelist())
    except (zipfile.BadZipFile, OSError):
        return False


def non_finite_entries(state: Mapping[str, Any], prefix: str = "") -> list[str]:
    """Names of the floating-point tensors and numbers in ``state`` holding a non-finite
    value: a state that must not be checkpointed as a good one."""
    found = []
    for key, value in state.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            found += non_finite_entries(value, f"{name}.")
        elif isinstance(value, list | tuple):
            found += non_finite_entries(dict(enumerate(value)), f"{name}.")
        elif (
            torch.is_tensor(value)
            and value.is_floating_point()
            and not bool(torch.isfinite(value).all())
        ) or (isinstance(value, float) and not math.isfinite(value)):
            found.append(name)
    return found


def listed(names: list[str], limit: int = 3) -> str:
    """The first ``limit`` names, comma-separated, and an ellipsis for the rest."""
    return ", ".join(names[:limit]) + (", …" if len(names) > limit else "")


def save_finite(
    state: dict[str, Any], path: str | Path, checked: tuple[str, ...], metadata: dict | None
) -> None:
    """Write ``state`` with ``metadata`` (:func:`write_checkpoint`) unless a tensor under
    a ``checked`` key (those it has) is not finite: then NonFiniteDataError, and ``path``
    keeps the last good state."""
    bad = non_finite_entries({key: state[key] for key in checked if key in state})
    if bad:
        raise NonFiniteDataError(
            f"not saved to {path}: the agent's state is not finite ({listed(bad)}; an "
            "update diverged: a learning rate too large?)"
        )
    write_checkpoint({**state, "metadata": metadata or {}}, path)


def check_origin(state: dict[str, Any], path: str | Path, env_id: str, strategy: str) -> None:
    """CheckpointError unless ``state`` was saved by a run of ``env_id`` and ``strategy``."""
    if state["env_id"] != env_id:
        saved_env = state["env_id"]
        raise CheckpointError(f"checkpoint {path} is of env {saved_env}, this run's is {env_id}")
    saved = state["config"].get("strategy", state["config"].get("optimizer"))
    if saved != strategy:
        raise CheckpointError(f"checkpoint {path} trains strategy {saved}, this run {strategy}")


def load_checked(
    path: str | Path,
    device: str | torch.device,
    env_id: str,
    strategy: str,
    load: Callable[[dict[str, Any]], None],
    check: Callable[[dict[str, Any]], None] | None = None,
    engine: str = "native",
) -> dict[str, Any]:
    """Read ``path`` as a checkpoint of ``engine`` for a run of ``env_id`` and ``strategy``,
    let ``check`` see its metadata (it may refuse by raising), then ``load`` the state;
    return the metadata. Every learner resumes through this one gate, so a damaged file,
    one of another run, or one whose tensors do not fit raises :class:`CheckpointError`
    naming the file, whatever the engine."""
    state = read_checkpoint(path, device, engine=engine)
    check_origin(state, path, env_id, strategy)
    if check is not None:
        check(state.get("metadata", {}))
    load_named(path, state, load)
    return state.get("metadata", {})


def load_named(
    path: str | Path, state: dict[str, Any], load: Callable[[dict[str, Any]], None]
) -> None:
    """``load(state)``, read from ``path``; what does not fit becomes a
    :class:`CheckpointError` naming the file (:func:`load_checked`, ``DDPG.load``)."""
    try:
        load(state)
    except CheckpointError as err:  # a part that says what is wrong with it
        raise CheckpointError(f"checkpoint {path} refused: {err}") from None
    except (RuntimeError, KeyError, ValueError, TypeError, IndexError) as err:
        saved = state.get("env_id") if isinstance(state, Mapping) else None
        of = f" (saved by a run of {saved})" if isinstance(saved, str) else ""
        raise CheckpointError(
            f"checkpoint {path}{of} does not match this run's networks or optimizer: {misfit(err)}"
        ) from None


def misfit(err: BaseException) -> str:
    """One line of what did not fit: torch's ``load_state_dict`` lists every mismatch on a
    line of its own after a heading; the first, shortened, and how many more."""
    lines = [line.strip() for line in str(err).strip().splitlines() if line.strip()]
    if not lines:
        return type(err).__name__
    if lines[0].startswith("Error(s) in loading state_dict") and len(lines) > 1:
        details, kind = lines[1:], ""
    else:
        details, kind = lines, f"{type(err).__name__}: "
    first = _SHAPE.sub(r"[\1]", details[0]).rstrip(". ")
    more = f" (and {len(details) - 1} more)" if len(details) > 1 else ""
    return f"{kind}{first[:200]}{more}"

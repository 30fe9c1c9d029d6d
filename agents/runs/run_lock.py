"""One writer per run directory: an exclusive lock held for the run's life.

Two processes writing one run directory interleave their ``eval.csv`` rows and TensorBoard
events and race on the checkpoint's rename, so every :func:`agents.runs.train.train`
call — a single run, a grid's run, a resume, either engine — first takes the directory's
lock and holds it until it returns. A second writer is refused with one line naming the
holder.

The lock is ``flock`` on ``<run_dir>/.lock``, not a PID file: the kernel releases it when
its holder dies however it dies (kill -9 included), so a stale lock cannot exist and no
PID has to be checked for life (a PID file's check fails when the PID has been reused, and
cannot be made for a holder on another machine of a shared file system). The file records
the holder's PID and host for the refusal's message only. It is removed on release, while
still locked; a process that opened it just before then finds, once it holds the lock,
that the name no longer points to its file, and tries again.
"""

from __future__ import annotations

import fcntl
import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ..common.errors import RunDirectoryError

LOCK_FILE = ".lock"


@contextmanager
def run_dir_lock(run_dir: str | Path) -> Iterator[None]:
    """Hold ``run_dir``'s lock (creating the directory) for the ``with`` block's life;
    :class:`RunDirectoryError` when another process holds it."""
    path = Path(run_dir) / LOCK_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = _acquire(path)
    try:
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()} {socket.gethostname()}\n".encode())
        yield
    finally:
        try:
            path.unlink(missing_ok=True)
        finally:
            os.close(fd)  # releases the lock


def _acquire(path: Path) -> int:
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder(fd)
            os.close(fd)
            raise RunDirectoryError(
                f"{path.parent} is being written by another train_agent ({holder}); "
                "one run directory takes one writer: wait for it to finish or stop it"
            ) from None
        except BaseException:
            os.close(fd)
            raise
        try:
            same = os.path.samestat(os.fstat(fd), os.stat(path))
        except FileNotFoundError:
            same = False
        if same:
            return fd
        os.close(fd)  # the holder removed the file as we opened it: take the new one


def _holder(fd: int) -> str:
    try:
        pid, _, host = os.pread(fd, 256, 0).decode().strip().partition(" ")
    except (OSError, UnicodeDecodeError):
        pid, host = "", ""
    if not pid:
        return "process unknown"
    return f"pid {pid} on {host}" if host and host != socket.gethostname() else f"pid {pid}"

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

The lock is written, so it must be the run directory's own file: a shared or copied runs
directory can carry a ``.lock`` that is a symbolic or hard link to a file elsewhere, and
writing the holder's PID through it would overwrite that file. It is opened without
following a link (``O_NOFOLLOW``) and refused, untouched, unless it is a regular file of
one name.
"""

from __future__ import annotations

import errno
import fcntl
import os
import socket
import stat
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
        _refuse_a_link(path)  # before opening: a device or FIFO is not opened either
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NOCTTY, 0o644)
        except OSError as err:
            if err.errno != errno.ELOOP:
                raise
            _refuse_a_link(path)  # became a link since the check
            raise
        try:
            _refuse_a_link(path, os.fstat(fd))  # what was opened, whatever the name is now
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
            same = os.path.samestat(os.fstat(fd), os.lstat(path))
        except FileNotFoundError:
            same = False
        if same:
            return fd
        os.close(fd)  # the holder removed the file as we opened it: take the new one


def _refuse_a_link(path: Path, opened: os.stat_result | None = None) -> None:
    """RunDirectoryError unless ``path`` (or the file ``opened`` there) is absent or a
    regular file of one name: the lock is never written through a link."""
    try:
        found = opened if opened is not None else os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISLNK(found.st_mode):
        what = f"symbolic link (to {os.readlink(path)})"
    elif stat.S_ISDIR(found.st_mode):
        what = "directory"
    elif not stat.S_ISREG(found.st_mode):
        what = "special file (a device, FIFO or socket)"
    elif found.st_nlink > 1:
        what = f"hard link (the file has {found.st_nlink} names)"
    else:
        return
    raise RunDirectoryError(
        f"{path} is a {what}, not a lock file (the lock is written, so it must be a regular "
        "file of its own, never a link to another file): remove it and run again"
    )


def _holder(fd: int) -> str:
    try:
        pid, _, host = os.pread(fd, 256, 0).decode().strip().partition(" ")
    except (OSError, UnicodeDecodeError):
        pid, host = "", ""
    if not pid:
        return "process unknown"
    return f"pid {pid} on {host}" if host and host != socket.gethostname() else f"pid {pid}"

"""Where compiled updates are cached: one TorchInductor cache directory per kernel set.

Why: TorchInductor's FX graph cache keys a compiled graph by the graph, torch's build,
Inductor's config and the torch thread count, but not by the CPU code it generated. That
code is C++ written for one vector instruction set — chosen from the CPU and
``ATEN_CPU_CAPABILITY`` — and built with ``-march=native``. A graph cached under one
capability and loaded under another is compiled from source meant for the other: measured
here (AVX2 machine), a graph cached with the machine's own kernels and loaded under
``ATEN_CPU_CAPABILITY=default`` no longer built (``at::vec`` undeclared) and the run
fell back to eager updates; on a CPU with AVX-512, loaded under ``avx2``, it built and
computed non-finite updates, every one of which was skipped. A cache directory shared by
machines (a cluster's home directory) or a changed environment does the same to a user.

So a compiled update is cached in ``<cache>/kernels-<key>/``, where ``<cache>`` is the
user's ``TORCHINDUCTOR_CACHE_DIR`` (Inductor's own default without it) and ``<key>`` a
hash of :func:`kernel_set`: everything the compiled code and the kernels it calls depend on
beyond what Inductor keys itself. Everything Inductor writes for the update — graphs,
generated C++, built libraries — goes there; ``kernels.json`` in it records the set.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import torch

#: Environment variables that choose the instructions of the kernels a compiled update
#: runs: ATen's own (and Inductor's vector ISA), MKL's (matrix products on the CPU) and
#: oneDNN's (under both of its names).
KERNEL_ENV = (
    "ATEN_CPU_CAPABILITY",
    "MKL_ENABLE_INSTRUCTIONS",
    "MKL_CBWR",
    "ONEDNN_MAX_CPU_ISA",
    "DNNL_MAX_CPU_ISA",
)


def kernel_set() -> dict[str, str]:
    """What the compiled update's kernels depend on, besides the graph itself.

    The torch version; the CPU (its model and instruction-set flags: the C++ is built
    with ``-march=native``); the capability ATen dispatches to and the vector ISA Inductor
    generates for, as each sees them in this process; and :data:`KERNEL_ENV`.
    """
    from torch._inductor.cpu_vec_isa import pick_vec_isa

    return {
        "torch": torch.__version__,
        "machine": platform.machine(),
        "cpu": _cpu_identity(),
        "aten_capability": torch.backends.cpu.get_cpu_capability(),
        "inductor_vec_isa": str(pick_vec_isa()),
        **{name: os.environ.get(name, "") for name in KERNEL_ENV},
    }


def kernel_key(kernels: dict[str, str] | None = None) -> str:
    """A short stable hash of :func:`kernel_set` (or of ``kernels``)."""
    text = json.dumps(kernels if kernels is not None else kernel_set(), sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _cpu_identity() -> str:
    """The CPU's model name and a hash of its flags (Linux), else what ``platform`` says."""
    try:
        info = Path("/proc/cpuinfo").read_text()
    except OSError:
        return platform.processor()
    fields: dict[str, str] = {}
    for line in info.splitlines():
        name, sep, value = line.partition(":")
        if sep:
            fields.setdefault(name.strip(), value.strip())
    flags = hashlib.sha256(" ".join(sorted(fields.get("flags", "").split())).encode())
    return f"{fields.get('model name', platform.processor())}; flags {flags.hexdigest()[:12]}"


def base_cache_dir() -> Path:
    """The user's ``TORCHINDUCTOR_CACHE_DIR``, or Inductor's default directory."""
    from torch._inductor.runtime.cache_dir_utils import default_cache_dir

    return Path(os.environ.get("TORCHINDUCTOR_CACHE_DIR") or default_cache_dir()).absolute()


@contextmanager
def kernel_cache_dir() -> Iterator[Path]:
    """Inductor's cache directory is ``<cache>/kernels-<key>`` inside the block.

    Inductor reads ``TORCHINDUCTOR_CACHE_DIR`` whenever it needs the directory, so the
    variable is set for the block and restored after it (Inductor sets it itself when it
    was unset). Compile in the block; the compiled function holds its code and runs
    anywhere afterwards.
    """
    kernels = kernel_set()
    directory = base_cache_dir() / f"kernels-{kernel_key(kernels)}"
    directory.mkdir(parents=True, exist_ok=True)
    record = directory / "kernels.json"
    if not record.exists():  # written whole, then renamed: a concurrent run reads all or none
        partial = directory / f"kernels.json.{os.getpid()}"
        partial.write_text(json.dumps(kernels, indent=1, sort_keys=True) + "\n")
        partial.replace(record)
    previous = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(directory)
    try:
        yield directory
    finally:
        if previous is None:
            os.environ.pop("TORCHINDUCTOR_CACHE_DIR", None)
        else:
            os.environ["TORCHINDUCTOR_CACHE_DIR"] = previous

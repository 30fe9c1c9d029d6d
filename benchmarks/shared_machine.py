"""A run's pace beside other work: torch's threads, and what a busy neighbour costs.

Why: on a machine of few cores a run shares them — with a second run, a grid, a compile,
another user's job. torch's CPU kernels start one thread per core, and OpenMP's threads spin
while they wait for each other, so two processes that both claim every core can slow each
other far more than half (a 3 k-step SB3 run took 17 s alone and 1 070 s at load 9). This
measures it: the same ``train_agent`` command (HalfCheetah-v4, vadam, compiled as its
preset says, the compile cache warmed first) timed end to end,

- alone, and beside a busy neighbour (``--neighbour``: a second process doing torch matrix
  products with torch's default threads, as another torch job does; ``run``: a second
  ``train_agent`` of the same command, as a user starting two runs);
- with torch's default threads, with ``OMP_NUM_THREADS=1``, and with the default threads
  and ``OMP_WAIT_POLICY=PASSIVE`` (OpenMP's waiting threads sleep instead of spinning),

and prints seconds and the ratio of each setting's busy time to its quiet time, and to the
default's quiet time.

    python benchmarks/shared_machine.py [--steps 3000] [--neighbour torch|run] [--rounds 1]

Nothing else should run while it measures (the machine's load is printed before each run).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SETTINGS = {
    "default threads": {},
    "OMP_NUM_THREADS=1": {"OMP_NUM_THREADS": "1"},
    "OMP_WAIT_POLICY=PASSIVE": {"OMP_WAIT_POLICY": "PASSIVE"},
}
#: a neighbour that keeps every core busy with torch's default threads until killed
TORCH_NEIGHBOUR = (
    "import torch\na = torch.randn(512, 512)\nwhile True:\n    a = torch.tanh(a @ a / 512)\n"
)


def command(steps: int, logdir: str) -> list[str]:
    exe = Path(sys.executable).with_name("train_agent")
    return [
        str(exe), "--env", "HalfCheetah-v4", "--opt", "vadam", "--steps", str(steps),
        "--eval-every", str(steps), "--eval-episodes", "1", "--no-progress",
        "--logdir", logdir,
    ]  # fmt: skip


def environment(extra: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "OMP_WAIT_POLICY")}
    return {**env, **extra}


def timed_run(steps: int, extra: dict[str, str]) -> float:
    """Seconds of one run, start to end, in a fresh directory."""
    with tempfile.TemporaryDirectory() as logdir:
        started = time.perf_counter()
        subprocess.run(
            command(steps, logdir), env=environment(extra), check=True, capture_output=True
        )
        return time.perf_counter() - started


def neighbour(kind: str, steps: int) -> subprocess.Popen:
    """The busy neighbour, started (and given a few seconds to get going)."""
    if kind == "torch":
        process = subprocess.Popen([sys.executable, "-c", TORCH_NEIGHBOUR], env=environment({}))
    else:  # a second run of the same command, many times longer than the timed one
        logdir = tempfile.mkdtemp()
        process = subprocess.Popen(
            command(50 * steps, logdir), env=environment({}), stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
    time.sleep(5)
    return process


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=3000)
    parser.add_argument("--neighbour", choices=["torch", "run"], default="torch")
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args()
    timed_run(args.steps, {})  # the compile cache, warm for every timed run
    quiet: dict[str, list[float]] = {name: [] for name in SETTINGS}
    busy: dict[str, list[float]] = {name: [] for name in SETTINGS}
    for _ in range(args.rounds):
        for name, extra in SETTINGS.items():
            print(f"load {os.getloadavg()[0]:.2f}: {name}, alone", flush=True)
            quiet[name].append(timed_run(args.steps, extra))
        for name, extra in SETTINGS.items():
            process = neighbour(args.neighbour, args.steps)
            try:
                print(f"load {os.getloadavg()[0]:.2f}: {name}, beside a neighbour", flush=True)
                busy[name].append(timed_run(args.steps, extra))
            finally:
                process.kill()
                process.wait()
    base = min(quiet["default threads"])
    print(f"\n{args.steps} steps, neighbour: {args.neighbour}, best of {args.rounds}")
    header = ("setting", "alone s", "beside s", "beside/alone", "÷ default alone")
    print(f"{header[0]:<26} {header[1]:>8} {header[2]:>9} {header[3]:>13} {header[4]:>16}")
    for name in SETTINGS:
        alone, beside = min(quiet[name]), min(busy[name])
        print(
            f"{name:<26} {alone:>8.1f} {beside:>9.1f} {beside / alone:>13.2f} "
            f"{alone / base:>8.2f} / {beside / base:.2f}"
        )


if __name__ == "__main__":
    main()

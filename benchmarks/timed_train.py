"""A ``train_agent`` command timed from outside, as a user runs it: end to end, to its first
step, and in its steady state, read off the lines it prints.

Why: what a user waits for is the whole process — imports, building the members, the
compile, training, the test episodes — and a population says where it is in its own lines
(:mod:`agents.runs.population_lines`): one starts line as its members take their first
step, then one status line for all of them, ``"<name>: N members step s/T (p%), X
seed-steps/s (N members), …"``, whose speed is the training's alone (the compile and the
evaluations left out). This runs the command (``python -m agents.cli`` with the arguments
after ``--``), stamps each line it prints with the seconds since it started, and writes one
JSON record:

- ``wall_s``, ``exit_status``, ``timed_out`` (``--timeout``: the run is stopped, SIGTERM then
  SIGKILL, and what it printed until then is still read);
- ``seed_steps_per_s``: members × steps / wall seconds, end to end (a completed run only);
- ``to_start_s``: seconds to the starts line (the members built, at their first step);
  ``to_first_status_s``: to the first status line; ``first_update_s``: the first update's
  seconds with its compile, as the run says them;
- ``status``: every status line (seconds, step, seed-steps/s); ``steady_seed_steps_per_s``:
  the median of those whose speed is measured after the first update (a status line's speed
  is the training's since the run's last log, every :data:`WINDOW` steps, the compile and
  the evaluations left out: lines :data:`WINDOW` steps or more past the first update; else
  the last line, as ``steady_from`` says), ``last_seed_steps_per_s``;
- ``cpu_cores``: the process's CPU seconds (user + system) over its wall seconds — how many
  of the host's cores it kept busy;
- ``lines``: what it printed (its first and last lines where it printed many).

    python benchmarks/timed_train.py --json whole.json [--timeout 200] -- \\
        --env HalfCheetah-v4 --opt vadam --seeds 100 --workers 1 --device cuda --steps 10000

``benchmarks/gpu_check.sh`` runs it for the 100- and 1 000-member populations on a GPU;
``tests/test_timed_train.py`` reads the lines as the runs write them today.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import resource
import signal
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

#: a population's starts line, or a single run's: how many members, how many steps
STARTS = re.compile(r"(?:: (\d+) members )?(?:starts|resumes at step \d+): .*?, (\d+) steps,")
#: a population's status line (:meth:`agents.runs.population_lines.PopulationLines.status`)
STATUS = re.compile(
    r"(\d+) members step (\d+)/(\d+) \(\d+%\), (\d+) seed-steps/s \((\d+) members\)"
)
#: a single run's status line (:class:`agents.runs.callback.RunCallback`)
SINGLE_STATUS = re.compile(r" step (\d+)/(\d+) \(\d+%\), (\d+) steps/s")
FIRST_UPDATE = re.compile(r"step (\d+): the first update took ([\d.]+) s")
#: steps over which a status line's speed is measured: the run's ``log_every`` (its default)
WINDOW = 1000
#: lines kept from each end of a long output
KEEP = 100
#: seconds a stopped run has to stop before it is killed
GRACE = 5.0


def run(command: list[str], timeout: float) -> tuple[list[tuple[float, str]], int, float, bool]:
    """Each line ``command`` prints (stdout and stderr) with its seconds since the start,
    echoed as it comes; its exit status, wall seconds, whether it was stopped — at
    ``timeout``, or by a SIGTERM to this process (``timeout`` in ``gpu_check.sh``)."""
    started = time.perf_counter()
    process = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        bufsize=1,
        start_new_session=True,  # its own process group: stopped with every child
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    stopped = threading.Event()

    def signal_group(number: int) -> None:
        with contextlib.suppress(ProcessLookupError):  # ended already
            os.killpg(process.pid, number)

    def stop(*_: object) -> None:
        """SIGTERM (train_agent checkpoints and stops), SIGKILL after :data:`GRACE` s."""
        stopped.set()
        signal_group(signal.SIGTERM)
        killer = threading.Timer(GRACE, signal_group, (signal.SIGKILL,))
        killer.daemon = True
        killer.start()

    signal.signal(signal.SIGTERM, stop)
    timer = threading.Timer(timeout, stop)
    timer.daemon = True
    timer.start()
    lines = []
    assert process.stdout is not None
    for line in process.stdout:
        at = time.perf_counter() - started
        lines.append((at, line.rstrip("\n")))
        print(f"[{at:7.1f} s] {line}", end="", flush=True)
    status = process.wait()
    timer.cancel()
    return lines, status, time.perf_counter() - started, stopped.is_set()


def figures(lines: list[tuple[float, str]]) -> dict[str, Any]:
    """What the lines say (module docstring)."""
    found: dict[str, Any] = {"members": None, "steps": None, "to_start_s": None}
    found.update(to_first_status_s=None, first_update_s=None, first_update_step=None)
    status = []
    for at, line in lines:
        if found["to_start_s"] is None and (match := STARTS.search(line)):
            found["to_start_s"] = round(at, 2)
            found["members"] = int(match[1] or 1)
            found["steps"] = int(match[2])
        elif found["first_update_s"] is None and (match := FIRST_UPDATE.search(line)):
            found["first_update_step"] = int(match[1])
            found["first_update_s"] = float(match[2])
        elif match := STATUS.search(line):
            step, speed = int(match[2]), float(match[4])
            status.append({"at_s": round(at, 2), "step": step, "seed_steps_per_s": speed})
        elif match := SINGLE_STATUS.search(line):
            step, speed = int(match[1]), float(match[3])
            status.append({"at_s": round(at, 2), "step": step, "seed_steps_per_s": speed})
        if status and found["to_first_status_s"] is None:
            found["to_first_status_s"] = status[0]["at_s"]
    found["status"] = status
    # A status line's speed is the run's since its last log (every WINDOW steps): steady
    # where that window began after the first update (the compile is left out either way).
    update = found["first_update_step"] or 0  # an eager run does not say it
    steady = [s for s in status if s["step"] >= update + WINDOW]
    found["steady_from"] = f"status lines at step {update} + {WINDOW} or later"
    if not steady and status:
        steady = status[-1:]
        found["steady_from"] = "the last status line (none later)"
    speeds = [s["seed_steps_per_s"] for s in steady]
    found["steady_seed_steps_per_s"] = statistics.median(speeds) if speeds else None
    found["last_seed_steps_per_s"] = status[-1]["seed_steps_per_s"] if status else None
    return found


def kept(lines: list[tuple[float, str]]) -> list[str]:
    """The printed lines, stamped; the first and last :data:`KEEP` of a long output."""
    stamped = [f"[{at:7.1f} s] {line}" for at, line in lines]
    if len(stamped) <= 2 * KEEP:
        return stamped
    left = len(stamped) - 2 * KEEP
    return [*stamped[:KEEP], f"… {left} lines left out …", *stamped[-KEEP:]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", type=Path, required=True, help="the record's file")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds (default 600)")
    parser.add_argument("train_agent", nargs=argparse.REMAINDER, help="-- train_agent's arguments")
    args = parser.parse_args()
    arguments = args.train_agent[1:] if args.train_agent[:1] == ["--"] else args.train_agent
    command = [sys.executable, "-m", "agents.cli", *arguments]
    load = os.getloadavg()[0]
    lines, status, wall, timed_out = run(command, args.timeout)
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    record: dict[str, Any] = {
        "command": "train_agent " + " ".join(arguments),
        "exit_status": status,
        "timed_out": timed_out,
        "wall_s": round(wall, 2),
        "cpu_cores": round((usage.ru_utime + usage.ru_stime) / wall, 2),
        "load_average_before": round(load, 2),
        "cores": os.cpu_count(),
        **figures(lines),
    }
    members, steps = record["members"], record["steps"]
    done = status == 0 and not timed_out and members is not None
    record["seed_steps_per_s"] = round(members * steps / wall, 1) if done else None
    record["lines"] = kept(lines)
    args.json.write_text(json.dumps(record, indent=1) + "\n")
    summary = {k: v for k, v in record.items() if k not in ("status", "lines")}
    print(json.dumps(summary), flush=True)
    sys.exit(124 if timed_out else status if status >= 0 else 128 - status)


if __name__ == "__main__":
    main()

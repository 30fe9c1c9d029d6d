"""The stages of one ``benchmarks/gpu_check.sh`` run packed into one JSON file.

Why: a lent GPU returns few files (eight at most), and a figure left in a log that did not
come back is lost with the device time it cost. ``gpu_check.sh`` keeps each stage's log,
its record (``NAME.json``, where the stage writes one) and what the script knows of it
(``NAME.stage``: exit status, seconds, limit, load, command) in a work folder, and calls this
after every stage, so the one file under its ``$OUT`` holds every figure measured so far even
when the script itself is stopped. Each stage's entry holds its record as the benchmark wrote
it and the end of its log (:data:`LOG_LINES` lines).

    python benchmarks/gpu_results.py WORK RESULTS.json
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

#: the last lines of each stage's log kept in the results
LOG_LINES = 150
#: ``NAME.stage``'s lines, in order; the command is the rest
META = ("exit_status", "seconds", "limit_s", "load_before")


def stage(work: Path, name: str) -> dict[str, Any]:
    """One stage's entry: what the script recorded, its record, its log's last lines."""
    entry: dict[str, Any] = {"name": name}
    meta = work / f"{name}.stage"
    if meta.exists():
        *values, command = meta.read_text().split("\n", len(META))
        entry.update(zip(META, (_number(v) for v in values), strict=True))
        entry["command"] = command.strip()
    else:
        entry["exit_status"] = "running"
    record = work / f"{name}.json"
    if record.exists():
        try:
            entry["results"] = json.loads(record.read_text())
        except json.JSONDecodeError as err:
            entry["results"] = f"unreadable: {err}"
    log = work / f"{name}.log"
    if log.exists():
        lines = log.read_text(errors="replace").splitlines()
        entry["log_lines"] = len(lines)
        entry["log"] = lines[-LOG_LINES:]
    return entry


def _number(text: str) -> Any:
    """A number where ``text`` is one ("skipped" and the like stay text)."""
    try:
        return float(text) if "." in text else int(text)
    except ValueError:
        return text


def commit() -> str | None:
    """The tree's commit, where it is a git checkout (a lent machine's copy is not)."""
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True)
    except OSError:
        return None
    return out.stdout.strip() or None


def pack(work: Path) -> dict[str, Any]:
    """Every stage of ``work`` in the order the script ran them (its ``stages`` file)."""
    names = (work / "stages").read_text().split() if (work / "stages").exists() else []
    return {
        "script": "benchmarks/gpu_check.sh",
        "packed_at": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "commit": commit(),
        "device": _text(work / "device.txt"),
        "cores": os.cpu_count(),
        "settings": dict(
            line.split("=", 1) for line in (_text(work / "settings.txt") or "").splitlines()
        ),
        "stages": [stage(work, name) for name in names],
    }


def _text(path: Path) -> str | None:
    return path.read_text().strip() if path.exists() else None


def main() -> None:
    if len(sys.argv) != 3:
        raise SystemExit(__doc__.strip().splitlines()[-1].strip())
    work, results = Path(sys.argv[1]), Path(sys.argv[2])
    partial = results.with_suffix(".partial")
    partial.write_text(json.dumps(pack(work), indent=1, ensure_ascii=False) + "\n")
    partial.replace(results)  # whole or the one before: never half a file


if __name__ == "__main__":
    main()

"""Does a sampled critic's uncertainty shrink where data is? Its spread of Q, from explore.csv.

Each run of a sampled critic (``--critic-opt``) logs, per logging window, the std of
Q(s, μ_φ(s)) over posterior samples at replayed states (``critic_spread_replay``) and at the
same states moved three standard deviations away (``critic_spread_far``), and how far its
held sample moved the acting actions (``critic_action_move``, ``critic_move_clipped``;
docs/manual.md). This script tabulates them for every such arm of a task's run tree at
10 k, 50 k and the last step: the median over seeds (and the seeds' range) of each, and of
the ratio far / replay — above 1 where the posterior is wider away from its data. A
chain's spread needs two held snapshots (two episodes); before, its cells read "–".

    python spread.py runs/SparseCartpoleSwingup-v0 --out SparseCartpoleSwingup-v0/spread.md
"""

from __future__ import annotations

import argparse
import csv
import statistics
from pathlib import Path

#: The steps tabulated besides each run's last logged one.
STEPS = (10_000, 50_000)
COLUMNS = ("critic_spread_replay", "critic_spread_far", "ratio", "critic_action_move",
           "critic_move_clipped")  # fmt: skip


def rows_at(explore: Path, steps: tuple[int, ...]) -> dict[int, dict[str, float]]:
    """The run's logged values at ``steps`` and at its last logged step, with far /
    replay."""
    found: dict[int, dict[str, float]] = {}
    with open(explore, newline="") as f:
        rows = [row for row in csv.DictReader(f) if row.get("critic_action_move")]
    last = int(rows[-1]["step"]) if rows else None
    for row in rows:
        step = int(row["step"])
        if step in steps or step == last:
            values = {key: float(row[key]) for key in COLUMNS if row.get(key)}
            if values.get("critic_spread_replay"):
                values["ratio"] = values["critic_spread_far"] / values["critic_spread_replay"]
            found[step] = values
    return found


def summary(runs: Path, steps: tuple[int, ...]) -> list[dict[str, object]]:
    """One row per arm with a sampled critic and step: each column's median over seeds and
    its smallest and largest value."""
    table = []
    for arm in sorted(p for p in runs.iterdir() if p.is_dir()):
        per_seed = [rows_at(e, steps) for e in sorted(arm.glob("seed*/explore.csv"))]
        per_seed = [r for r in per_seed if r]
        if not per_seed:
            continue
        for step in sorted({step for r in per_seed for step in r}):
            at = [r[step] for r in per_seed if step in r]
            if not at:
                continue
            row: dict[str, object] = {"arm": arm.name, "step": step, "seeds": len(at)}
            for key in COLUMNS:
                values = [r[key] for r in at if key in r]
                if values:
                    row[key] = (statistics.median(values), min(values), max(values))
            table.append(row)
    return table


def markdown(task: str, table: list[dict[str, object]]) -> str:
    lines = [
        f"# {task}: the sampled critics' spread of Q",
        "",
        "Median over seeds [smallest, largest] of the std of Q(s, μ(s)) over posterior samples "
        "at replayed states and at states 3 std away (far), their ratio, and the acting "
        "actions' mean move (half action ranges) and the share clipped, at each step "
        "(`python spread.py`).",
        "",
        "| arm | step | seeds | spread, replayed | spread, far | far / replayed | move | clipped |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in table:
        cells = []
        for key in COLUMNS:
            value = row.get(key)
            cells.append("–" if value is None else "{:.3g} [{:.3g}, {:.3g}]".format(*value))
        lines.append(
            f"| {row['arm']} | {row['step']} | {row['seeds']} | " + " | ".join(cells) + " |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", type=Path, help="a task's run tree: <arm>/seed<k>/explore.csv")
    parser.add_argument("--out", type=Path, required=True, help="the markdown table to write")
    args = parser.parse_args()
    table = summary(args.runs, STEPS)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(markdown(args.runs.name, table))


if __name__ == "__main__":
    main()

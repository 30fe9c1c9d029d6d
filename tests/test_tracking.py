"""``train_agent --track``: runs in Weights & Biases, read back from what W&B wrote.

Every test runs W&B offline (``WANDB_MODE=offline``, as tests/conftest.py sets for the
suite): no network and no account. What a run sent is read from the run's own transaction
log, ``<dir>/wandb/offline-run-*/run-<id>.wandb``, the file ``wandb sync`` uploads: W&B's
``Record`` protobufs (``wandb.proto.wandb_internal_pb2``) in LevelDB's log framing, which
:func:`wandb_records` reads. The values it holds are compared with independent readers of
the run's other outputs: TensorBoard's event reader, ``eval.csv`` and ``config.yaml``.
"""

from __future__ import annotations

import json
import math
import os
import struct
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from agents.runs.run_logger import load_events, read_eval_csv

from conftest import error_line, train_agent_process

wandb_pb = pytest.importorskip("wandb.proto.wandb_internal_pb2")

REPO = Path(__file__).resolve().parents[1]
#: docs/manual.md's commands that read offline runs back without a terminal UI or a login,
#: run here as written in a directory that holds one tracked run.
READ_BACK = (
    "wandb leet inspect --summary runs/wandb",
    "wandb sync --dry-run runs/wandb/offline-run-*",
)


#: LevelDB's log: 32 KiB blocks of chunks, each behind a 7-byte header (CRC-32C, length,
#: type); W&B's file starts with its own 7-byte header (``:W&B``, a magic, a version).
BLOCK = 32768
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4
#: A tiny run: no compile, a 16x16 network, 2 evaluations, scalars every 100 steps.
TINY = ("--env", "Pendulum-v1", "--steps", "400", "--eval-every", "200", "--eval-episodes",
        "1", "--no-compile", "--set", "hidden_sizes=[16,16]", "--set", "log_every=100",
        "--no-progress")  # fmt: skip


def wandb_records(path: Path) -> list:
    """Every record of a W&B transaction log (``run-<id>.wandb``)."""
    data = path.read_bytes()
    assert data[:4] == b":W&B", f"{path} is not a W&B transaction log"
    position, chunks, records = 7, b"", []
    while position + 7 <= len(data):
        if BLOCK - position % BLOCK < 7:  # a block's tail too short for a header: padding
            position += BLOCK - position % BLOCK
            continue
        _, length, kind = struct.unpack("<IHB", data[position : position + 7])
        chunks += data[position + 7 : position + 7 + length]
        position += 7 + length
        if kind in (FULL, LAST):
            record = wandb_pb.Record()
            record.ParseFromString(chunks)
            records.append(record)
            chunks = b""
    return records


class WandbRun:
    """What a W&B run recorded: its run record and its history rows (key → value)."""

    def __init__(self, path: Path) -> None:
        records = wandb_records(path)
        self.run = next(r.run for r in records if r.WhichOneof("record_type") == "run")
        self.config = {item.key: json.loads(item.value_json) for item in self.run.config.update}
        self.history = [
            {item.key or "/".join(item.nested_key): json.loads(item.value_json)
             for item in r.history.item}
            for r in records if r.WhichOneof("record_type") == "history"
        ]  # fmt: skip
        self.exit_code = next(
            r.exit.exit_code for r in records if r.WhichOneof("record_type") == "exit"
        )

    def values(self, tag: str) -> dict[int, float]:
        """``tag``'s value at each environment step (``global_step``)."""
        return {row["global_step"]: row[tag] for row in self.history if tag in row}


def wandb_runs(directory: Path) -> list[WandbRun]:
    return [WandbRun(p) for p in sorted(directory.glob("wandb/offline-run-*/run-*.wandb"))]


def test_a_grid_is_one_wandb_run_per_run_with_its_settings_and_every_tensorboard_scalar(
    tmp_path,
):
    """Two seeds, trained as one population (one process): two W&B runs in the strategy's
    group, each with its run's settings and every scalar of its TensorBoard events."""
    result = train_agent_process(
        *TINY, "--seeds", "2", "--track", "--wandb-project", "tiny", cwd=tmp_path
    )
    assert result.returncode == 0, result.stderr[-3000:]
    runs = wandb_runs(tmp_path / "runs")  # W&B's files beside the runs, in the logdir
    assert sorted(r.run.display_name for r in runs) == [
        "Pendulum-v1/vadam/seed0", "Pendulum-v1/vadam/seed1"
    ]  # fmt: skip
    for run in runs:
        run_dir = tmp_path / "runs" / run.run.display_name
        assert run.run.project == "tiny"
        assert run.run.run_group == "vadam"  # the strategy: W&B aggregates its seeds
        assert run.run.run_id == (run_dir / "wandb_run_id").read_text().strip()
        assert run.exit_code == 0
        settings = yaml.safe_load((run_dir / "config.yaml").read_text())
        assert {k: run.config[k] for k in settings} == settings
        assert run.config["total_steps"] == 400 and run.config["hidden_sizes"] == [16, 16]
        # Every TensorBoard scalar, under its tag, at its step, with its value (TensorBoard
        # stores float32).
        events = load_events(run_dir)
        tags = events.Tags()["scalars"]
        assert {"eval/mean_return", "train/episode_return", "explore/sigma_mean"} <= set(tags)
        for tag in tags:
            tensorboard = {e.step: e.value for e in events.Scalars(tag)}
            sent = run.values(tag)
            assert sent.keys() == tensorboard.keys(), tag
            for step, value in tensorboard.items():
                assert math.isclose(sent[step], value, rel_tol=1e-6, abs_tol=1e-9), (tag, step)
        rows = read_eval_csv(run_dir / "eval.csv")
        evaluations = {row["step"]: row["mean_return"] for row in rows}
        assert run.values("eval/mean_return") == pytest.approx(evaluations)
        assert sorted(evaluations) == [200, 400]


def test_a_tracked_run_says_where_its_files_are_and_reads_back_as_documented(tmp_path):
    """W&B's lines: where the run's files are, no version banner or history panel (W&B's
    quiet mode), and no Weave suggestion for this project's ``agents`` package, which W&B
    takes for OpenAI's Agents SDK. Then the manual's commands read the run back."""
    result = train_agent_process(*TINY, "--track", cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    lines = (result.stdout + result.stderr).splitlines()
    said = [line for line in lines if line.startswith("wandb:")]
    assert not [line for line in said if "Weave" in line or "Detected [" in line], said
    assert not [line for line in said if "Run history" in line or "wandb version" in line], said
    assert any("Run data is saved locally in" in line for line in said), said
    manual = (REPO / "docs" / "manual.md").read_text()
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"  # the venv's wandb
    outputs = []
    for command in READ_BACK:
        assert f"\n{command}\n" in manual, command
        read = subprocess.run(
            ["bash", "-c", command], cwd=tmp_path, capture_output=True, text=True, timeout=120,
            env={**os.environ, "PATH": path}, stdin=subprocess.DEVNULL,
        )  # fmt: skip
        assert read.returncode == 0, (command, read.stdout[-2000:], read.stderr[-2000:])
        outputs.append(read.stdout + read.stderr)
    summary, dry_run = outputs
    assert "Pendulum-v1/vadam/seed0" in summary and "finished (exit code 0)" in summary
    assert "eval/mean_return" in summary and "hidden_sizes" in summary
    assert "Would sync 1 run(s)" in dry_run


def test_a_resumed_run_continues_its_wandb_run_and_wandbs_variables_are_honoured(tmp_path):
    elsewhere = tmp_path / "elsewhere"
    variables = {
        "WANDB_DIR": str(elsewhere), "WANDB_PROJECT": "from-the-variable", "WANDB_QUIET": "false"
    }  # fmt: skip
    first = train_agent_process(
        *TINY, "--steps", "200", "--track", "--wandb-group", "mine", cwd=tmp_path, env=variables
    )
    assert first.returncode == 0, first.stderr[-3000:]
    assert "wandb: Tracking run with wandb version" in first.stderr  # not quiet: as asked
    again = train_agent_process(
        *TINY, "--resume", "--track", "--wandb-group", "mine", cwd=tmp_path, env=variables
    )
    assert again.returncode == 0, again.stderr[-3000:]
    before, after = wandb_runs(elsewhere)
    assert not (tmp_path / "runs" / "wandb").exists()
    for run in (before, after):
        assert (run.run.run_group, run.run.project) == ("mine", "from-the-variable")
    assert before.run.run_id == after.run.run_id
    assert sorted(before.values("eval/mean_return")) == [200]
    assert sorted(after.values("eval/mean_return")) == [400]


def test_wandb_flags_without_track_are_one_line(tmp_path, train_agent):
    result = train_agent(*TINY, "--wandb-project", "p", cwd=tmp_path)
    assert error_line(result) == "train_agent: error: --wandb-project applies with --track only"
    assert not (tmp_path / "runs").exists()


def test_wandb_is_imported_only_for_track_and_its_absence_names_the_extra(tmp_path):
    """No import of ``wandb`` until a run is tracked; then, ``wandb`` absent (its import
    failing as Python fails it for a missing module), one line naming the extra."""
    code = (
        "import sys, agents.cli, agents.runs.train\n"
        "assert 'wandb' not in sys.modules, 'wandb imported'\n"
        "sys.modules['wandb'] = None\n"
        f"sys.exit(agents.cli.main({[*TINY, '--track']!r}))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True
    )
    assert error_line(result) == (
        "train_agent: error: --track needs wandb, an optional dependency: "
        "pip install 'param-explore[track]'"
    )
    assert not (tmp_path / "runs").exists()


def test_a_wandb_that_cannot_start_the_run_is_one_line_and_keeps_nothing(
    tmp_path, train_agent, monkeypatch
):
    """W&B refusing its own settings (here a mode it does not know) as it would refuse an
    online run without a login: one line, before anything is made (W&B's settings from the
    environment are checked with the run's), no run directory kept."""
    monkeypatch.setenv("WANDB_MODE", "no-such-mode")
    result = train_agent(*TINY, "--track", cwd=tmp_path)
    line = error_line(result)
    assert line.startswith("train_agent: error: --track: W&B refuses its settings in the ")
    assert "WANDB_MODE='no-such-mode'" in line
    assert not (tmp_path / "runs" / "Pendulum-v1" / "vadam").exists()

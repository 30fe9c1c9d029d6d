"""Progress on a terminal says what a log says: the run's start line and its first update's
compile above the bar too, the compile left out of the bar's time and ETA, and progress
shown whichever of stdout and stderr is redirected (terminals here are pseudo-terminals)."""

from __future__ import annotations

import re
import sys
import time

import pytest

from agents.ddpg.compiled_update import CompiledUpdate, run_traced_graph
from agents.runs import callback

from conftest import train_agent_on_terminal

ENV = "Pendulum-v1"
NAME = f"{ENV}/vadam/seed0"
RUN = ["--env", ENV, "--steps", "400", "--eval-every", "200", "--eval-episodes", "1",
       "--logdir", "out", "--set", "hidden_sizes=[16,16]",
       "--set", "learning_starts=50"]  # fmt: skip


@pytest.mark.parametrize(
    ("stdout_tty", "stderr_tty", "progress", "form"),
    [
        (True, True, True, (True, False)),  # a terminal: the bar
        (False, True, True, (True, True)),  # >log: the bar, and lines in the log
        (True, False, True, (False, True)),  # 2>log: lines on the terminal
        (False, False, True, (False, True)),  # both redirected: lines
        (True, True, "lines", (False, True)),  # a grid's runs
        (False, False, False, (False, False)),  # --no-progress
    ],
)
def test_progress_shows_whichever_stream_is_redirected(
    stdout_tty, stderr_tty, progress, form, monkeypatch
):
    monkeypatch.setattr(sys.stdout, "isatty", lambda: stdout_tty)
    monkeypatch.setattr(sys.stderr, "isatty", lambda: stderr_tty)
    assert callback.progress_form(progress) == callback.ProgressForm(*form)


def test_a_run_with_stderr_redirected_shows_its_status_lines_on_the_terminal(tmp_path):
    """``train_agent ... 2>log`` on a terminal: no bar can be drawn (it would go to the
    log), so the status lines are shown; the log keeps no progress."""
    code, shown, _, stderr = train_agent_on_terminal(
        *RUN, "--no-compile", cwd=tmp_path, streams=("stdout",)
    )
    assert code == 0, stderr
    assert f"{NAME} starts: DDPG with vadam on {ENV}, 400 steps" in shown
    assert re.search(rf"{NAME} step 200/400 \(50%\), \d+ steps/s", shown)
    assert f"{NAME} step 400: eval return" in shown
    assert "%|" not in stderr and "step" not in stderr  # no bar written to the log


def test_the_first_updates_compile_is_said_and_left_out_of_the_bars_time(
    train_agent, tmp_path, capsys, monkeypatch
):
    """A bar on a terminal (stderr made one) and a compiled run whose compile takes 3 s
    (the traced update run op by op, after a sleep: this test is about the bar, not the
    compiler): the start line says the first update compiles, a line gives its seconds, and
    the bar's elapsed time (hence its rate and ETA) leaves them out."""

    def slow_compile(graph, inputs):
        time.sleep(3.0)
        return run_traced_graph(graph, inputs)

    monkeypatch.setattr(CompiledUpdate, "backend", slow_compile)
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    started = time.monotonic()
    result = train_agent(*RUN, "--compile", cwd=tmp_path)
    wall = time.monotonic() - started
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()  # above the bar
    assert lines[0].startswith(f"{NAME} starts: DDPG with vadam")
    assert "the first update, once 50 transitions are stored, compiles" in lines[0]
    took = [re.match(rf"{NAME} step 51: the first update took ([\d.]+) s", line)
            for line in lines]  # fmt: skip
    seconds = [float(match.group(1)) for match in took if match]
    assert len(seconds) == 1 and 3.0 <= seconds[0] < wall
    final = result.stderr.replace("\r", "\n").strip().splitlines()[-1]
    minutes, secs = re.search(r"\[(\d+):(\d+)<", final).groups()
    assert int(minutes) * 60 + int(secs) <= wall - seconds[0] + 1  # whole seconds, rounded


def test_an_eager_run_says_nothing_of_a_compile(train_agent, tmp_path, monkeypatch):
    monkeypatch.setattr(sys.stdout, "isatty", lambda: False)
    result = train_agent(*RUN, "--no-compile", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "compile" not in result.stdout and "first update" not in result.stdout

"""Run directories written by an earlier version resume in this one.

``tests/data/d1f21b0_runs`` holds two runs written by d1f21b0 — the last commit before the
one engine, whose populations were whole agents re-pointed from outside and whose
observation statistics were numpy arrays — by::

    train_agent --env Pendulum-v1 --steps 400 --eval-every 200 --eval-episodes 2 --seeds 2 \\
        --set hidden_sizes=[8,8] --set buffer_size=500 --set learning_starts=100 \\
        --set normalize_observations=true --set save_replay_buffer=true

(each run's ``config.yaml``, ``eval.csv`` and ``checkpoints/latest.pt``; 148 KB).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import torch

from agents.common.envs import make_env
from agents.ddpg.population import build_members
from agents.settings.resolve import resolve_runs

DATA = Path(__file__).parent / "data" / "d1f21b0_runs"
SETTINGS = ["hidden_sizes=[8,8]", "buffer_size=500", "learning_starts=100",
            "normalize_observations=true", "save_replay_buffer=true"]  # fmt: skip
COMMAND = ["--env", "Pendulum-v1", "--eval-every", "200", "--eval-episodes", "2",
           "--seeds", "2", "--set", "hidden_sizes=[8,8]", "--set", "buffer_size=500",
           "--set", "learning_starts=100", "--set", "normalize_observations=true",
           "--set", "save_replay_buffer=true", "--no-progress"]  # fmt: skip


def test_the_runs_d1f21b0_wrote_load_into_a_population_s_rows():
    """Both checkpoints load into the rows of one stacked state — weights, targets,
    optimizer state, observation statistics (numpy sums then, float64 tensors now) and
    replay buffer as saved — and the members then step together."""
    configs = resolve_runs(["vadam"], [0, 1], env="Pendulum-v1", set_options=SETTINGS)
    members = build_members([make_env("Pendulum-v1") for _ in configs],
                            [c.learner for c in configs], [0, 1], "cpu")  # fmt: skip
    for s, member in enumerate(members.agents):
        path = DATA / "Pendulum-v1" / "vadam" / f"seed{s}" / "checkpoints" / "latest.pt"
        member.load_checkpoint(path)
        saved, loaded = torch.load(path, weights_only=True), member.state_dict(True)
        for part in ("actor", "critic", "target_actor", "target_critic"):
            for name, tensor in saved[part].items():
                assert torch.equal(loaded[part][name], tensor), (s, part, name)
        for key, tensor in saved["observation_statistics"].items():
            assert torch.equal(loaded["observation_statistics"][key], tensor), key
        for key, value in saved["buffer"].items():
            same = torch.equal if isinstance(value, torch.Tensor) else (lambda a, b: a == b)
            assert same(loaded["buffer"][key], value), key
        for k, entry in saved["actor_optimizer"]["state"].items():
            for key, tensor in entry.items():
                assert torch.equal(loaded["actor_optimizer"]["state"][k][key], tensor), key
        row = members.state.obs_statistics.sum[s]
        assert torch.equal(row, saved["observation_statistics"]["sum"])  # in its row
    assert len({len(m.buffer) for m in members.agents}) == 1


def test_train_agent_resumes_the_runs_d1f21b0_wrote(tmp_path, train_agent):
    """``--resume`` takes both runs on to their new end, as one population."""
    shutil.copytree(DATA, tmp_path / "runs")
    result = train_agent(*COMMAND, "--steps", "600", "--resume", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    for s in (0, 1):
        run = tmp_path / "runs" / "Pendulum-v1" / "vadam" / f"seed{s}"
        steps = [row.split(",")[0] for row in (run / "eval.csv").read_text().splitlines()[1:]]
        assert steps == ["200", "400", "600"]
        saved = torch.load(run / "checkpoints" / "latest.pt", weights_only=True)
        assert saved["counters"]["num_timesteps"] == 600

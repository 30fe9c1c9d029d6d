"""A training run: agent, periodic evaluation, logging, checkpoints, resume.

Run directory ``<logdir>/<env>/<optimizer>/seed<k>/``::

    config.yaml              the resolved configuration
    events.out.tfevents.*    TensorBoard scalars (tags in ``run_logger``)
    eval.csv                 the evaluation curve
    checkpoints/latest.pt    networks, targets, both optimizers, RNG, counters
                             (+ replay buffer with ``save_replay_buffer``);
                             ``latest.zip`` (SB3's format) with ``engine: sb3``

Checkpoints are written at the first episode end after every ``checkpoint_every`` steps,
at the end of training, and on Ctrl-C.
"""

from __future__ import annotations

import dataclasses
import sys
import time
from pathlib import Path
from typing import Protocol

import gymnasium as gym
import numpy as np
from tqdm import tqdm

from ..curiosity import VimeBonus, bonus_config, make_vime_bonus
from ..engine.ddpg import DDPG, Callback, resolve_device
from ..engine.envs import make_env
from ..engine.evaluation import evaluate_together, success_rate
from ..errors import ConfigError, NonFiniteDataError, UpdatesSkippedError
from ..sb3.agent import SB3Agent
from ..tasks import with_task_report
from .config import TrainConfig, load_run_config, save_config
from .run_logger import EVAL_CSV, RunLogger, read_eval_csv, write_comparison_layout

CHECKPOINT_DIR = "checkpoints"
#: Offset between the training seed and the evaluation episodes' seeds.
EVAL_SEED_OFFSET = 1_000_000
#: Offset between the training seed and the curiosity bonus's own generator's seed.
BONUS_SEED_OFFSET = 2_000_000
#: Keys that may differ between a run's saved config and the command resuming it.
RESUMABLE_CHANGES = {
    "total_steps",
    "device",
    "logdir",
    "eval_episodes",
    "compile",
    "skipped_window",
}


class RunnableAgent(Protocol):
    """What a run needs of an engine: :class:`DDPG` and :class:`SB3Agent` provide it."""

    checkpoint_name: str
    num_timesteps: int
    num_updates: int
    between_episodes: bool

    def learn(self, total_steps: int, callback: Callback) -> object: ...
    def predict(self, obs: np.ndarray, deterministic: bool = True) -> np.ndarray: ...
    def pop_losses(self) -> dict[str, float]: ...
    def exploration_statistics(self) -> dict[str, float]: ...
    def bonus_statistics(self) -> dict[str, float]: ...
    @property
    def skipped_updates(self) -> int: ...
    def save(self, path: str | Path, include_buffer: bool = False) -> None: ...
    def load_checkpoint(self, path: str | Path) -> None: ...


class RunCallback(Callback):
    """Evaluation, scalars, checkpoints and progress for :func:`train`."""

    def __init__(
        self, config: TrainConfig, checkpoint_path: Path, logger: RunLogger, progress: bool
    ) -> None:
        self.config = config
        self.checkpoint_path = checkpoint_path
        self.logger = logger
        # One env per test episode: the episodes of an evaluation step together.
        self.eval_envs = [make_task_env(config) for _ in range(config.eval_episodes)]
        self.last_eval: float | None = None
        self.bar = tqdm(
            total=config.total_steps,
            unit="step",
            dynamic_ncols=True,
            disable=not (progress and sys.stderr.isatty()),
        )
        self._clock = time.perf_counter()
        self._clock_step = 0
        self._checkpoint_due = False
        self._skipped_reported = 0
        #: (step, updates, skipped updates) at the start of the current skip window.
        self._window_start = (0, 0, 0)

    def on_training_start(self, agent: RunnableAgent) -> None:
        self._window_start = (agent.num_timesteps, agent.num_updates, agent.skipped_updates)
        self.bar.update(agent.num_timesteps - self.bar.n)
        self._clock = time.perf_counter()
        self._clock_step = agent.num_timesteps

    def on_episode_end(
        self, agent: RunnableAgent, episode_return: float, episode_length: int
    ) -> None:
        self.logger.scalar("train/episode_return", episode_return, agent.num_timesteps)
        self.logger.scalar("train/episode_length", episode_length, agent.num_timesteps)

    def on_step(self, agent: RunnableAgent) -> bool:
        step = agent.num_timesteps
        cfg = self.config
        if cfg.skipped_window and step % cfg.skipped_window == 0:
            self._check_updates_applied(agent, step)
        if step % cfg.log_every == 0:
            self._log_scalars(agent, step)
        # Every eval_every steps, and at the end of a run whose length the schedule misses
        # (a short run, e.g. --steps 2000, still reports its return and success rate).
        if step % cfg.eval_every == 0 or step == cfg.total_steps:
            self._evaluate(agent, step)
        if step % cfg.checkpoint_every == 0:
            self._checkpoint_due = True
        # Checkpoints wait for the end of an episode: a resumed run then replays exactly
        # the episodes an uninterrupted one would have (a mid-episode state is not saved).
        if self._checkpoint_due and agent.between_episodes:
            self.checkpoint(agent)
        if step % 100 == 0:
            self.bar.update(step - self.bar.n)
        return step < cfg.total_steps

    def _check_updates_applied(self, agent: RunnableAgent, step: int) -> None:
        """Stop a run none of whose updates in the last ``skipped_window`` steps was
        applied: a non-finite loss or gradient every time means nothing is trained, and
        nothing will be (the weights that gave it do not change). One host read per window."""
        start, updates, skipped = self._window_start
        made = agent.num_updates - updates
        all_skipped = made > 0 and agent.skipped_updates - skipped >= made
        self._window_start = (step, agent.num_updates, agent.skipped_updates)
        if all_skipped:
            raise UpdatesSkippedError(
                f"all {made} updates of steps {start + 1}-{step} were skipped for a "
                f"non-finite loss or gradient (skipped_window={self.config.skipped_window}): "
                "the run was training nothing; training stopped"
            )

    def _log_scalars(self, agent: RunnableAgent, step: int) -> None:
        elapsed = time.perf_counter() - self._clock
        speed = (step - self._clock_step) / elapsed if elapsed > 0 else 0.0
        self.logger.scalar("time/steps_per_second", speed, step)
        for name, value in agent.pop_losses().items():
            self.logger.scalar(f"loss/{name}", value, step)
        for tag, value in agent.bonus_statistics().items():
            self.logger.scalar(tag, value, step)
        for name, value in agent.exploration_statistics().items():
            self.logger.scalar(f"explore/{name}", value, step)
        skipped = agent.skipped_updates
        self.logger.scalar("train/skipped_updates", skipped, step)
        if skipped > self._skipped_reported:
            self._write(
                f"step {step}: {skipped} update(s) skipped so far (non-finite loss or gradient)"
            )
            self._skipped_reported = skipped
        postfix = {"steps/s": f"{speed:.0f}"}
        if self.last_eval is not None:
            postfix["eval"] = f"{self.last_eval:.1f}"
        self.bar.set_postfix(postfix, refresh=False)
        self._clock, self._clock_step = time.perf_counter(), step

    def _evaluate(self, agent: RunnableAgent, step: int) -> None:
        started = time.perf_counter()
        seed = self.config.seed + EVAL_SEED_OFFSET
        final_infos: list[dict] = []
        mean, std = evaluate_together(agent, self.eval_envs, seed=seed, final_infos=final_infos)
        success = success_rate(final_infos)
        episodes = self.config.eval_episodes
        self.logger.evaluation(step, mean, std, episodes, time.time(), success_rate=success)
        self.logger.scalar("time/eval_seconds", time.perf_counter() - started, step)
        self.last_eval = mean
        succeeded = "" if success is None else f", success {success:.0%}"
        self._write(f"step {step}: eval return {mean:.1f} ± {std:.1f} ({episodes} ep{succeeded})")
        # Evaluation time is not training time: restart the throughput clock.
        self._clock += time.perf_counter() - started

    def _write(self, line: str) -> None:
        """One line of the run's log: plain on a pipe, above the bar on a terminal."""
        if self.bar.disable:
            print(line, flush=True)
        else:
            self.bar.write(line)

    def checkpoint(self, agent: RunnableAgent) -> None:
        agent.save(self.checkpoint_path, include_buffer=self.config.save_replay_buffer)
        self._checkpoint_due = False

    def on_training_end(self, agent: RunnableAgent) -> None:
        self.bar.update(agent.num_timesteps - self.bar.n)
        self.bar.close()


def _check_resumable(saved: TrainConfig, requested: TrainConfig, run_dir: Path) -> None:
    old, new = dataclasses.asdict(saved), dataclasses.asdict(requested)
    changed = [k for k in old if old[k] != new[k] and k not in RESUMABLE_CHANGES]
    if changed:
        details = ", ".join(f"{k}: {old[k]!r} -> {new[k]!r}" for k in changed)
        raise ConfigError(f"cannot resume {run_dir} with a different config ({details})")


def _evaluated_to_the_end(run_dir: Path, config: TrainConfig) -> bool:
    """Whether ``eval.csv`` holds the run's last scheduled evaluation (or, for a run
    shorter than ``eval_every``, the one at its end)."""
    csv_path = run_dir / EVAL_CSV
    last = config.total_steps // config.eval_every * config.eval_every or config.total_steps
    if not csv_path.exists():
        return False
    return any(row["step"] >= last for row in read_eval_csv(csv_path))


def train(
    config: TrainConfig, resume: bool = False, progress: bool = True, env: gym.Env | None = None
) -> Path:
    """Train as ``config`` says and return the run directory.

    With ``resume``, an existing run directory is continued from its last checkpoint (or
    started if it has none); without it, a directory that already holds results is an
    error, so nothing is ever overwritten.
    """
    run_dir = config.run_dir()
    agent = make_agent(config, env)
    checkpoint_path = run_dir / CHECKPOINT_DIR / agent.checkpoint_name
    has_results = checkpoint_path.exists() or (run_dir / EVAL_CSV).exists()
    if has_results and not resume:
        raise ConfigError(
            f"{run_dir} already holds a run; pass --resume to continue it, "
            "or choose another --logdir or --seed"
        )
    if resume and (run_dir / "config.yaml").exists():
        _check_resumable(load_run_config(run_dir / "config.yaml"), config, run_dir)

    if resume and not checkpoint_path.exists() and _evaluated_to_the_end(run_dir, config):
        # Results without checkpoints: a finished run whose checkpoints were not kept (a
        # study committed with its eval.csv and config.yaml only). Nothing to redo.
        print(f"{run_dir}: already complete (eval.csv reaches the last evaluation)", flush=True)
        return run_dir

    resume_step = None
    if resume and checkpoint_path.exists():
        agent.load_checkpoint(checkpoint_path)
        resume_step = agent.num_timesteps
        if resume_step >= config.total_steps:
            print(f"{run_dir}: already complete ({resume_step} steps)", flush=True)
            return run_dir

    run_dir.mkdir(parents=True, exist_ok=True)
    write_comparison_layout(Path(config.logdir) / config.env)
    save_config(config, run_dir / "config.yaml")
    logger = RunLogger(run_dir, resume_step=resume_step)
    callback = RunCallback(config, checkpoint_path, logger, progress)
    try:
        agent.learn(config.total_steps - agent.num_timesteps, callback)
    except (KeyboardInterrupt, NonFiniteDataError) as stop:
        callback.checkpoint(agent)  # the last good state: nothing bad was stored
        if isinstance(stop, NonFiniteDataError):
            raise NonFiniteDataError(
                f"{stop}; checkpoint of the last good state: {checkpoint_path}"
            ) from None
        raise
    finally:
        logger.close()
    callback.checkpoint(agent)
    return run_dir


def make_task_env(config: TrainConfig) -> gym.Env:
    """The run's env: ``config.env`` with ``config.env_kwargs``, reporting its task's
    success and coverage (:mod:`agents.tasks`)."""
    return with_task_report(make_env(config.env, config.env_kwargs))


def make_agent(config: TrainConfig, env: gym.Env | None = None) -> RunnableAgent:
    """The engine ``config.engine`` names, configured by ``config``."""
    env = env if env is not None else make_task_env(config)
    if config.engine == "sb3":
        return SB3Agent(env, config.agent_config(), seed=config.seed, device=config.device)
    return DDPG(
        env,
        config.agent_config(),
        seed=config.seed,
        device=config.device,
        bonus=make_bonus(config, env),
    )


def make_bonus(config: TrainConfig, env: gym.Env) -> VimeBonus | None:
    """The run's curiosity bonus (``bonus:`` settings), on its own generator, or None."""
    if bonus_config(config.bonus) is None:
        return None
    seed = config.seed + BONUS_SEED_OFFSET
    device = resolve_device(config.device)
    return make_vime_bonus(
        config.bonus, env.observation_space, env.action_space, seed=seed, device=device
    )

"""A training run: agent, periodic evaluation, logging, checkpoints, resume.

Run directory ``<logdir>/<env>/<optimizer>/seed<k>/``::

    config.yaml              the resolved configuration
    events.out.tfevents.*    TensorBoard scalars (tags in ``run_logger``)
    eval.csv                 the evaluation curve
    explore.csv              the explore/ scalars per logging window, from the events,
                             written when training stops (``explore_log``)
    checkpoints/latest.pt    networks, targets, both optimizers, RNGs, counters, the run's
                             settings (+ replay buffer with ``save_replay_buffer``); data
                             only, for either engine
    .lock                    while a process writes the run (``run_lock``)

Checkpoints are written when a run starts (step 0), at the first episode end after every
``checkpoint_every`` steps, at the end of training, on Ctrl-C and SIGTERM, and when the
environment fails or gives a non-finite number — never of a state that is not finite.
With ``algo: trpo`` "the end of an episode" is the end of a rollout (its update done): a
due checkpoint and a stop request wait for it, and a failure inside a rollout keeps the
last checkpoint (:mod:`agents.sb3.trpo_agent`).
"""

from __future__ import annotations

import dataclasses
import math
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

import gymnasium as gym
import numpy as np
from tqdm import tqdm

from ..curiosity import VimeBonus, bonus_config, make_vime_bonus
from ..curiosity.sb3 import VimeCallback
from ..engine.config import upgrade_config_keys
from ..engine.ddpg import DDPG, Callback, resolve_device
from ..engine.envs import episode_limit, make_env
from ..engine.evaluation import evaluate_together, success_rate
from ..errors import (
    CheckpointError,
    ConfigError,
    DamagedFileError,
    EnvironmentFailure,
    NonFiniteDataError,
    RunDirectoryError,
    UpdatesSkippedError,
    os_error_message,
    os_error_reason,
)
from ..sb3.agent import SB3Agent
from ..sb3.trpo_agent import SB3TRPOAgent
from ..tasks import with_task_report
from .config import TrainConfig, load_run_config, save_config
from .explore_log import EXPLORE_CSV, write_explore_csv
from .run_lock import LOCK_FILE, run_dir_lock
from .run_logger import (
    EVAL_CSV,
    RunLogger,
    eval_rows_from_events,
    read_eval_csv,
    write_comparison_layout,
)
from .stopping import RunInterrupted, stop_on_signals, stop_requested

CHECKPOINT_DIR = "checkpoints"
CONFIG_FILE = "config.yaml"
#: The sb3 engine's checkpoint of earlier versions: SB3's own zip, never loaded.
LEGACY_SB3_CHECKPOINT = "latest.zip"
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
    """What a run needs of an engine: :class:`DDPG`, :class:`SB3Agent` and
    :class:`SB3TRPOAgent` provide it."""

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
    def save(
        self, path: str | Path, include_buffer: bool = False, metadata: dict | None = None
    ) -> None: ...
    def load_checkpoint(
        self, path: str | Path, check: Callable[[dict[str, Any]], None] | None = None
    ) -> dict[str, Any]: ...


class RunCallback(Callback):
    """Evaluation, scalars, checkpoints and progress for :func:`train`.

    ``logger`` is set once the step-0 checkpoint of a new run is written.
    """

    logger: RunLogger

    def __init__(self, config: TrainConfig, checkpoint_path: Path, progress: bool) -> None:
        self.config = config
        self.checkpoint_path = checkpoint_path
        # One env per test episode: the episodes of an evaluation step together.
        self.eval_envs = [make_task_env(config) for _ in range(config.eval_episodes)]
        self.last_eval: float | None = None
        #: The step of the checkpoint on disk (None before this call wrote one).
        self.checkpoint_step: int | None = None
        self.bar = tqdm(
            total=config.total_steps,
            unit="step",
            dynamic_ncols=True,
            disable=not (progress and sys.stderr.isatty()),
        )
        self._clock = time.perf_counter()
        self._clock_step = 0
        self._checkpoint_due = False
        self._evaluating = False
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
        # A signal asked to stop: the step is complete, the run stops here.
        return step < cfg.total_steps and stop_requested() is None

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
        self._evaluating = True
        final_infos: list[dict] = []
        try:
            mean, std = evaluate_together(agent, self.eval_envs, seed=seed, final_infos=final_infos)
        except (NonFiniteDataError, EnvironmentFailure) as err:
            raise type(err)(f"{err}, in the evaluation at step {step}") from None
        if not (math.isfinite(mean) and math.isfinite(std)):  # finite rewards, summed
            raise NonFiniteDataError(
                f"the evaluation at step {step} has a non-finite return ({mean} ± {std})"
            )
        self._evaluating = False
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
        """Write the agent's state, with the run's settings (a resume checks against them)."""
        metadata = {
            "run_config": dataclasses.asdict(self.config),
            "buffer_saved": self.config.save_replay_buffer,
        }
        self._check_policy(agent)
        try:
            agent.save(self.checkpoint_path, self.config.save_replay_buffer, metadata)
        except OSError as err:
            kept = (
                f"; the checkpoint of step {self.checkpoint_step} there is intact"
                if self.checkpoint_step is not None
                else ""
            )
            raise RunDirectoryError(
                f"cannot write checkpoint {self.checkpoint_path}: {os_error_reason(err)}{kept}"
            ) from None
        self.checkpoint_step = agent.num_timesteps
        self._checkpoint_due = False

    def _check_policy(self, agent: RunnableAgent) -> None:
        """A state whose weights are finite can still act non-finitely (weights so large
        that a layer overflows): such a state is never a checkpoint. The probe is the mean
        action at the observation nearest zero (no env call, no random number drawn)."""
        space = self.eval_envs[0].observation_space
        obs = np.clip(np.zeros(space.shape), space.low, space.high).astype(space.dtype)
        action = agent.predict(obs, True)
        if not np.isfinite(action).all():
            raise NonFiniteDataError(
                f"not saved to {self.checkpoint_path}: at step {agent.num_timesteps} the "
                f"policy's action is not finite ({np.asarray(action).tolist()}; an update "
                "diverged: a learning rate too large?)"
            )

    def checkpoint_last_good(self, agent: RunnableAgent) -> str:
        """After a failure: checkpoint the state if it is a good one; say where the run
        can continue from."""
        previous = f"{self.checkpoint_path} holds step {self.checkpoint_step}"
        if self._evaluating:  # the checkpoint would pass an evaluation that was not written
            return f"not checkpointed mid-evaluation; the last checkpoint stays: {previous}"
        if getattr(agent, "boundaries_only", False) and not agent.between_episodes:
            # TRPO: a state inside a rollout cannot be continued (its rollout is lost).
            return f"not checkpointed mid-rollout; the last checkpoint stays: {previous}"
        try:
            self.checkpoint(agent)
        except NonFiniteDataError:
            return f"this state is not checkpointed; the last good one stays: {previous}"
        step = agent.num_timesteps
        return f"checkpoint of the last good state (step {step}): {self.checkpoint_path}"

    def on_training_end(self, agent: RunnableAgent) -> None:
        self.bar.update(agent.num_timesteps - self.bar.n)
        self.bar.close()


def _check_resumable(
    saved: TrainConfig, requested: TrainConfig, run_dir: Path, source: str = "config.yaml"
) -> None:
    old, new = dataclasses.asdict(saved), dataclasses.asdict(requested)
    changed = [k for k in old if old[k] != new[k] and k not in RESUMABLE_CHANGES]
    if changed:
        details = ", ".join(f"{k}: {old[k]!r} -> {new[k]!r}" for k in changed)
        raise ConfigError(
            f"cannot resume {run_dir} with a different config ({details}; the run's own "
            f"settings are those of its {source})"
        )


def _saved_config(run_dir: Path) -> TrainConfig | ConfigError | None:
    """The run's ``config.yaml``; None when missing, the error when it is damaged."""
    path = run_dir / CONFIG_FILE
    if not path.exists():
        return None
    try:
        return load_run_config(path)
    except ConfigError as err:
        return err


def _check_run_config(run_dir: Path, requested: TrainConfig, metadata: dict[str, Any]) -> None:
    """Resume only with the settings the checkpoint was trained with: those the checkpoint
    records (``config.yaml`` may be gone or edited), else ``config.yaml``'s (a checkpoint
    of an earlier version records the agent's settings only)."""
    on_disk = _saved_config(run_dir)
    if "run_config" in metadata:
        try:
            saved = TrainConfig(**upgrade_config_keys(metadata["run_config"]))
            saved.validate()
        except (TypeError, ConfigError) as err:
            raise CheckpointError(
                f"the checkpoint in {run_dir / CHECKPOINT_DIR} records settings that are not "
                f"valid ({err})"
            ) from None
        _check_resumable(saved, requested, run_dir, source="checkpoint")
        if not isinstance(on_disk, TrainConfig):
            what = "missing" if on_disk is None else f"damaged ({on_disk})"
            print(
                f"{run_dir}: {CONFIG_FILE} was {what}; written again from the checkpoint's "
                "settings",
                flush=True,
            )
        return
    if on_disk is None:
        raise RunDirectoryError(
            f"cannot resume {run_dir}: its {CONFIG_FILE} is missing, and its checkpoint (of "
            f"an earlier version) does not record the run's settings; restore {CONFIG_FILE}"
        )
    if isinstance(on_disk, ConfigError):
        raise RunDirectoryError(f"cannot resume {run_dir}: {on_disk}; restore {CONFIG_FILE}")
    _check_resumable(on_disk, requested, run_dir)


def _evaluated_to_the_end(run_dir: Path, config: TrainConfig) -> bool:
    """Whether ``eval.csv`` holds the run's last scheduled evaluation (or, for a run
    shorter than ``eval_every``, the one at its end)."""
    csv_path = run_dir / EVAL_CSV
    last = config.total_steps // config.eval_every * config.eval_every or config.total_steps
    if not csv_path.exists():
        return False
    return any(row["step"] >= last for row in read_eval_csv(csv_path))


def _eval_rows_to_keep(run_dir: Path, config: TrainConfig, resume_step: int) -> list[dict]:
    """``eval.csv``'s rows up to the checkpoint, checked against the evaluations the
    checkpoint has passed; rebuilt from the TensorBoard events when the file is missing."""
    expected = list(range(config.eval_every, resume_step + 1, config.eval_every))
    csv_path = run_dir / EVAL_CSV
    rebuild = "remove it to have it rebuilt from the TensorBoard events, or restore it"
    if csv_path.exists():
        try:
            rows = [row for row in read_eval_csv(csv_path) if row["step"] <= resume_step]
        except DamagedFileError as err:
            raise DamagedFileError(f"cannot resume: {err}; {rebuild}") from None
        found = [row["step"] for row in rows]
        if found != expected:
            raise DamagedFileError(
                f"cannot resume: {csv_path} lacks evaluations the checkpoint (step "
                f"{resume_step}) has passed (it has steps {_steps(found)}, the run made "
                f"{_steps(expected)}); {rebuild}"
            )
        return rows
    rows = eval_rows_from_events(run_dir, resume_step, config.eval_episodes) if expected else []
    found = [row["step"] for row in rows]
    if found != expected:
        raise RunDirectoryError(
            f"cannot resume: {csv_path} is missing, and the TensorBoard events hold the "
            f"evaluations at steps {_steps(found)} only, not {_steps(expected)}; restore it"
        )
    if rows:
        print(
            f"{run_dir}: {EVAL_CSV} was missing; rebuilt from the TensorBoard events "
            f"({len(rows)} evaluations, as TensorBoard stores them: float32)",
            flush=True,
        )
    return rows


def _steps(steps: list[int]) -> str:
    if not steps:
        return "none"
    return ", ".join(map(str, steps)) if len(steps) <= 6 else f"{steps[0]} … {steps[-1]}"


def _has_results(run_dir: Path) -> bool:
    return (run_dir / EVAL_CSV).exists() or any(run_dir.glob("events.out.tfevents.*"))


def train(
    config: TrainConfig, resume: bool = False, progress: bool = True, env: gym.Env | None = None
) -> Path:
    """Train as ``config`` says and return the run directory.

    With ``resume``, an existing run directory is continued from its last checkpoint (or
    started if it has nothing yet); without it, a directory that already holds results is
    an error, so nothing is ever overwritten. The directory is locked for the call's life
    (:mod:`agents.runs.run_lock`). What a resume trusts is checked first: the checkpoint,
    the settings it records (or ``config.yaml``'s), ``eval.csv`` against the evaluations
    the checkpoint has passed; a missing or damaged file stops the call with one line
    naming it, and nothing is deleted. A run that fails before its first step leaves
    nothing behind, so the same command can simply be run again.

    SIGINT and SIGTERM stop the run at the next step, after a checkpoint
    (:mod:`agents.runs.stopping`), and raise :class:`RunInterrupted`.
    """
    run_dir = config.run_dir()
    agent = make_agent(config, env)  # errors in the settings or the env: nothing written yet
    if run_dir.exists() and not run_dir.is_dir():
        raise RunDirectoryError(f"{run_dir} is a file, not a run directory")
    new_dirs = [d for d in (run_dir, *run_dir.parents) if not d.exists()]
    try:
        with stop_on_signals(), run_dir_lock(run_dir):
            return _train_locked(config, agent, run_dir, resume, progress)
    except OSError as err:
        raise RunDirectoryError(os_error_message(err, "cannot write")) from None
    finally:
        for directory in new_dirs:  # left empty by a run that failed before its first step
            try:
                directory.rmdir()
            except OSError:
                break


def _train_locked(
    config: TrainConfig, agent: RunnableAgent, run_dir: Path, resume: bool, progress: bool
) -> Path:
    checkpoint_path = run_dir / CHECKPOINT_DIR / agent.checkpoint_name
    legacy = run_dir / CHECKPOINT_DIR / LEGACY_SB3_CHECKPOINT
    if config.engine == "sb3" and legacy.exists() and not checkpoint_path.exists():
        raise CheckpointError(
            f"{legacy} is a checkpoint of an earlier version: SB3's own zip, which holds "
            "pickled objects that loading would run, so it is never loaded; train the run "
            f"again in another --logdir (or after moving {run_dir} away)"
        )
    if (checkpoint_path.exists() or _has_results(run_dir)) and not resume:
        raise RunDirectoryError(
            f"{run_dir} already holds a run; pass --resume to continue it, "
            "or choose another --logdir or --seed"
        )
    resume_step, rows = None, []
    if checkpoint_path.exists():
        metadata = agent.load_checkpoint(
            checkpoint_path, check=lambda meta: _check_run_config(run_dir, config, meta)
        )
        resume_step = agent.num_timesteps
        if resume_step >= config.total_steps:
            print(f"{run_dir}: already complete ({resume_step} steps)", flush=True)
            _write_missing_explore_csv(run_dir)
            return run_dir
        rows = _eval_rows_to_keep(run_dir, config, resume_step)
        no_buffer = "buffer_saved" in metadata and not metadata["buffer_saved"]
        if resume_step > 0 and no_buffer and config.algo == "ddpg":
            print(
                f"{run_dir}: resuming at step {resume_step} without the replay buffer "
                "(save_replay_buffer: false): it refills from new experience, so the run "
                "continues on another trajectory than an uninterrupted one",
                flush=True,
            )
    elif _has_results(run_dir):
        saved = _saved_config(run_dir)
        if isinstance(saved, ConfigError):
            raise RunDirectoryError(f"cannot resume {run_dir}: {saved}; restore {CONFIG_FILE}")
        if saved is not None:
            _check_resumable(saved, config, run_dir)
        if _evaluated_to_the_end(run_dir, config):
            # A finished run whose checkpoints were not kept (a study committed with its
            # eval.csv and config.yaml only). Nothing to redo.
            print(f"{run_dir}: already complete (eval.csv reaches the last evaluation)", flush=True)
            _write_missing_explore_csv(run_dir)
            return run_dir
        raise RunDirectoryError(
            f"cannot resume {run_dir}: its checkpoint {checkpoint_path} is missing but the "
            "directory holds results (eval.csv, TensorBoard events); restore the checkpoint "
            "to continue the run, or move the directory away to train it again"
        )

    before = {p for p in run_dir.rglob("*")}
    try:
        write_comparison_layout(Path(config.logdir) / config.env)
        save_config(config, run_dir / CONFIG_FILE)
        callback = RunCallback(config, checkpoint_path, progress)
        callback.checkpoint_step = resume_step
        if resume_step is None:
            callback.checkpoint(agent)  # step 0: a run with results always has a checkpoint
        callback.logger = RunLogger(run_dir, resume_step=resume_step, rows=rows)
    except (ConfigError, OSError) as err:
        if resume_step is None:
            _remove_new_files(run_dir, before)
            raise _not_kept(err, run_dir) from None
        raise
    return _run(config, agent, callback, run_dir, resume_step, before)


def _run(
    config: TrainConfig,
    agent: RunnableAgent,
    callback: RunCallback,
    run_dir: Path,
    resume_step: int | None,
    before: set[Path],
) -> Path:
    try:
        agent.learn(config.total_steps - agent.num_timesteps, callback)
    except (NonFiniteDataError, EnvironmentFailure, OSError) as stop:
        callback.logger.close()
        if resume_step is None and agent.num_timesteps == 0:
            # Nothing was trained: leave nothing behind, so that the command runs again.
            _remove_new_files(run_dir, before)
            raise _not_kept(stop, run_dir) from None
        if isinstance(stop, OSError):
            raise
        raise type(stop)(f"{stop}; {callback.checkpoint_last_good(agent)}") from None
    finally:
        callback.logger.close()
    signum = stop_requested()
    callback.checkpoint(agent)
    write_explore_csv(run_dir)
    if signum is not None and agent.num_timesteps < config.total_steps:
        raise RunInterrupted(signum)
    return run_dir


def _write_missing_explore_csv(run_dir: Path) -> None:
    """A finished run from before runs wrote ``explore.csv`` gets it from its events (if
    they are there: a committed study's run has only ``eval.csv`` and ``config.yaml``)."""
    if not (run_dir / EXPLORE_CSV).exists():
        write_explore_csv(run_dir)


def _not_kept(err: ConfigError | OSError, run_dir: Path) -> ConfigError:
    """The error of a new run that failed before its first step, which left nothing."""
    if isinstance(err, OSError):
        err = RunDirectoryError(os_error_message(err, "cannot write"))
    return type(err)(f"{err}; nothing was trained, so {run_dir} was not kept")


def _remove_new_files(run_dir: Path, before: set[Path]) -> None:
    """Remove what this call wrote into the (locked) run directory."""
    for path in sorted(set(run_dir.rglob("*")) - before, reverse=True):
        if path.name == LOCK_FILE:
            continue
        if path.is_dir():
            path.rmdir()
        else:
            path.unlink(missing_ok=True)


def make_task_env(config: TrainConfig) -> gym.Env:
    """The run's env: ``config.env`` with ``config.env_kwargs`` and ``max_episode_steps``,
    reporting its task's success and coverage (:mod:`agents.tasks`)."""
    return with_task_report(make_env(config.env, config.env_kwargs, config.max_episode_steps))


def make_agent(config: TrainConfig, env: gym.Env | None = None) -> RunnableAgent:
    """The engine ``config.engine`` names, configured by ``config``, on an env whose
    episodes end (its own time limit, or ``max_episode_steps``)."""
    if env is None:
        env = make_task_env(config)
    elif config.max_episode_steps is not None:
        env = gym.wrappers.TimeLimit(env, config.max_episode_steps)
    if episode_limit(env) is None:
        raise ConfigError(
            f"{config.env} has no time limit, so an episode might never end (evaluation "
            "would never return, and checkpoints wait for an episode's end); give it one "
            "with --set max_episode_steps=N"
        )
    if config.algo == "trpo":
        bonus = make_bonus(config, env)
        vime = VimeCallback(bonus=bonus) if bonus is not None else None
        return SB3TRPOAgent(env, config, bonus_callback=vime)
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

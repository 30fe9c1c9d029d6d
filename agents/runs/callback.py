"""The run's callback: evaluation, scalars, checkpoints and progress, called by any learner
after every environment step (:class:`agents.common.callbacks.Callback`).

Progress, one of three forms (``progress``): on a terminal a bar named after the run
(``HalfCheetah-v4/vadam/seed0``) with one speed, the training throughput (evaluation
excluded, tqdm's own rate hidden), and the latest evaluation's return; ``"lines"``, a grid's
runs, which share one terminal, where a bar per process would overwrite the others; or none.
Status lines are also what a single run prints where its bar would not be seen or not be
all that is kept (:func:`progress_form`): stdout not a terminal (piped, ``nohup``, a batch
scheduler's log), or stderr not one (``2>log``). SB3 prints its table whatever the output
is, and a log that stays silent until the first evaluation (minutes, with the one-off
compile before it) cannot be told from a hung run. A run says at its start, bar or lines,
what runs, where it writes and what the first update costs, then (lines) a status line
(step, speed, latest evaluation, σ) every :data:`STATUS_SECONDS` and at least every
:data:`STATUS_FRACTION` of the run. Every evaluation prints a line naming its run either
way (above the bar on a terminal), and so does the first update of a compiled run, with
the seconds its compile took: they are left out of the bar's time and ETA and out of the
steps/s (a 20 s compile at step 1 000 of 20 000 had made the ETA read 27 minutes).
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable
from functools import cached_property
from pathlib import Path
from typing import Literal, NamedTuple

import gymnasium as gym
import numpy as np
from tqdm import tqdm

from ..common.callbacks import Callback, RunnableAgent
from ..common.errors import (
    EnvironmentFailure,
    NonFiniteDataError,
    RunDirectoryError,
    UpdatesSkippedError,
    os_error_reason,
)
from ..common.evaluation import evaluate_together, success_rate
from ..common.tags import (
    EXPLORE_SIGMA_MEAN,
    TRAIN_EPISODE_LENGTH,
    TRAIN_EPISODE_RETURN,
    explore_scalars,
    learning_rate_scalars,
    sigma_text,
)
from ..settings import RunSettings
from .agent_factory import make_task_env
from .population_lines import PopulationLines
from .run_logger import RunLogger
from .stopping import stop_requested

#: Offset between the training seed and the evaluation episodes' seeds.
EVAL_SEED_OFFSET = 1_000_000
#: Seconds between two status lines of a run in ``"lines"`` progress (a grid's runs).
STATUS_SECONDS = 30.0
#: A status line at least every this fraction of the run's steps, however fast it runs.
STATUS_FRACTION = 0.1
#: The bar: the run's name, steps, time, and the postfix's speed and eval (no tqdm rate).
BAR_FORMAT = (
    "{desc}: {percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt} [{elapsed}<{remaining}{postfix}]"
)

#: ``True``: a bar on a terminal, status lines when stdout is not one; ``"lines"``: status
#: lines only (a grid's runs); ``False``: neither.
Progress = bool | Literal["lines"]
STATUS_LINES: Progress = "lines"


class ProgressForm(NamedTuple):
    """What a run's progress shows: a bar (on stderr), status lines (on stdout), or both."""

    bar: bool
    lines: bool


def progress_form(progress: Progress) -> ProgressForm:
    """How ``progress`` shows, given which of stdout and stderr is a terminal: the bar where
    stderr is one; status lines wherever there is no bar or stdout is not a terminal (a
    log keeps them), so that a run redirected either way (``>log``, ``2>log``) shows its
    progress; ``"lines"`` (a grid's runs) lines only; False nothing."""
    if progress is False:
        return ProgressForm(bar=False, lines=False)
    if progress == STATUS_LINES:
        return ProgressForm(bar=False, lines=True)
    bar = sys.stderr.isatty()
    return ProgressForm(bar=bar, lines=not bar or not sys.stdout.isatty())


def compiles_update(config: RunSettings) -> bool:
    """Whether the run's first update compiles (the native engine's compiled update)."""
    return bool(getattr(config.learner, "compile", False)) and config.engine == "native"


def run_name(config: RunSettings) -> str:
    """The run as its progress names it: its directory below the logdir
    (``HalfCheetah-v4/vadam/seed0``)."""
    run_dir = config.run_dir()
    try:
        return run_dir.relative_to(config.logdir).as_posix()
    except ValueError:
        return run_dir.as_posix()


def start_line(config: RunSettings, step: int) -> str:
    """What a run says as it starts, for a log read later: what trains, where it writes,
    and, for a compiled update, that its first step compiles (the seconds before anything
    else moves)."""
    strategy = "" if config.algo == "trpo" else f" with {config.strategy}"
    bonus = "" if config.bonus is None else f" and {config.bonus.label()}"
    start = "starts" if step == 0 else f"resumes at step {step}"
    line = (
        f"{start}: {config.algo.upper()}{strategy}{bonus} on {config.env}, "
        f"{config.total_steps} steps, an evaluation every {config.eval_every}; "
        f"writes {config.run_dir()}"
    )
    if compiles_update(config):
        line += (
            f"; the first update, once {config.learner.learning_starts} transitions are "
            "stored, compiles, once per machine for these networks and strategy (~30 s; "
            "~3 s once cached, --no-compile skips it)"
        )
    return line


class RunCallback(Callback):
    """Evaluation, scalars, checkpoints and progress for :func:`train`.

    ``logger`` is set once the step-0 checkpoint of a new run is written.
    """

    logger: RunLogger

    def __init__(self, config: RunSettings, checkpoint_path: Path, progress: Progress) -> None:
        self.config = config
        self.name = run_name(config)
        self.checkpoint_path = checkpoint_path
        #: How an evaluation's test episodes run: (agent, seed, final infos) → (mean, std);
        #: on :attr:`eval_envs`, or a population's members' together
        #: (:class:`agents.ddpg.population.SharedTestEpisodes`).
        self.test_episodes: Callable[[RunnableAgent, int, list], tuple[float, float]] = (
            lambda agent, seed, final_infos: evaluate_together(
                agent, self.eval_envs, seed=seed, final_infos=final_infos
            )
        )
        self.last_eval: float | None = None
        #: The last logged mean σ of a strategy with weight noise (None: none logged).
        self.last_sigma: float | None = None
        #: The step of the checkpoint on disk (None before this call wrote one).
        self.checkpoint_step: int | None = None
        form = progress_form(progress)
        self.bar = tqdm(
            total=config.total_steps,
            desc=self.name,
            unit="step",
            bar_format=BAR_FORMAT,
            dynamic_ncols=True,
            disable=not form.bar,
        )
        self._status_lines = form.lines
        self._says_start = form.bar or form.lines
        #: Until the run's first update in this process (which compiles): the clock at the
        #: end of the last step, and the update count it started with.
        self._compile_pending = compiles_update(config)
        self._before_step = 0.0
        self._updates_at_start = 0
        self._status_at = time.monotonic()
        self._status_every = max(1, math.ceil(config.total_steps * STATUS_FRACTION))
        self._status_step = 0
        self._speed: float | None = None
        self._clock = time.perf_counter()
        self._clock_step = 0
        self._checkpoint_due = False
        #: The lines of the population this run is a member of, which say for all its
        #: members what each run's lines say of it (None: a run of its own).
        self.population: PopulationLines | None = None
        self._evaluating = False
        self._skipped_reported = 0
        #: (step, updates, skipped updates) at the start of the current skip window.
        self._window_start = (0, 0, 0)

    @cached_property
    def eval_envs(self) -> list[gym.Env]:
        """One env per test episode, the episodes of an evaluation step together; made when
        first needed (a population's members run theirs on the population's envs)."""
        return [make_task_env(self.config) for _ in range(self.config.eval_episodes)]

    def on_training_start(self, agent: RunnableAgent) -> None:
        self._window_start = (agent.num_timesteps, agent.num_updates, agent.skipped_updates)
        self.bar.update(agent.num_timesteps - self.bar.n)
        self._clock = time.perf_counter()
        self._clock_step = agent.num_timesteps
        self._status_step = agent.num_timesteps
        self._updates_at_start = agent.num_updates
        self._before_step = time.perf_counter()
        if self._says_start:
            line = start_line(self.config, agent.num_timesteps)
            if self.population is not None:
                self.population.started(line)
            else:
                self._write(line)

    def on_episode_end(
        self, agent: RunnableAgent, episode_return: float, episode_length: int, step: int
    ) -> None:
        self.logger.scalar(TRAIN_EPISODE_RETURN, episode_return, step)
        self.logger.scalar(TRAIN_EPISODE_LENGTH, episode_length, step)

    def on_step(self, agent: RunnableAgent) -> bool:
        step = agent.num_timesteps
        cfg = self.config
        if self._compile_pending:
            self._until_first_update(agent, step)
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
        if self._says_status() and self._status_due(step):
            self._write_status(step)
        # A signal asked to stop: the step is complete, the run stops here.
        return step < cfg.total_steps and stop_requested() is None

    def join_population(self, lines: PopulationLines, first: bool) -> None:
        """This run is a member of a population whose lines are ``lines``; the ``first``
        member's says what the population's one compiled update cost (the others' would
        repeat it, and would have to be called every step until then)."""
        self.population = lines
        lines.join(self)
        if not first:
            self._compile_pending = False

    def next_call(self, agent: RunnableAgent) -> tuple[int, bool]:
        """The next step at which :meth:`on_step` has work: a log, an evaluation, a
        checkpoint, a skip window's check, the run's end, a progress update (every 100
        steps, with a bar or status lines) or the next fraction's status line; and, while a
        checkpoint waits for the end of an episode, that end. Until the first update (whose
        compile it times) every step."""
        step, cfg = agent.num_timesteps, self.config
        if self._compile_pending:
            return step + 1, self._checkpoint_due
        periods = [cfg.log_every, cfg.eval_every, cfg.checkpoint_every, cfg.skipped_window]
        says_status = self._says_status()
        if says_status or not self.bar.disable:
            periods.append(100)
        boundaries = [(step // p + 1) * p for p in periods if p]
        boundaries.append(cfg.total_steps)
        if says_status:  # overdue when it took the lines over from a member that stopped
            boundaries.append(max(self._status_step + self._status_every, step + 1))
        after = [b for b in boundaries if b > step]
        return min(after, default=step + 1), self._checkpoint_due

    def _until_first_update(self, agent: RunnableAgent, step: int) -> None:
        """Before the run's first update, the clock at each step's end; at the step of the
        first update (its compile), that step's seconds are said, and left out of the
        bar's time and ETA and of the throughput (as an evaluation's are)."""
        now = time.perf_counter()
        if agent.num_updates == self._updates_at_start:
            self._before_step = now
            return
        self._compile_pending = False
        seconds = now - self._before_step
        self._clock += seconds
        self.bar.unpause()  # tqdm: its clock restarts from its last refresh
        self._write(
            f"step {step}: the first update took {seconds:.1f} s with its compile "
            "(not counted in the steps/s and the ETA)"
        )

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
        for tag, value in self._explore_and_learning_rates(agent).items():
            self.logger.scalar(tag, value, step)
        skipped = agent.skipped_updates
        self.logger.scalar("train/skipped_updates", skipped, step)
        if skipped > self._skipped_reported:
            self._write(
                f"step {step}: {skipped} update(s) skipped so far (non-finite loss or gradient)"
            )
            self._skipped_reported = skipped
        self._speed = speed
        self._show_progress(step)
        self._clock, self._clock_step = time.perf_counter(), step

    def _explore_and_learning_rates(self, agent: RunnableAgent) -> dict[str, float]:
        """The ``explore/`` tags (σ only for a strategy with weight noise) and, for DDPG,
        the actor's and the critic's learning rate as the run's settings resolve them
        (neither engine schedules them) — the tags of :mod:`agents.common.tags`."""
        strategy = getattr(self.config.learner, "strategy", None)
        explores = strategy is None or strategy.optimizer_class.explores
        scalars = explore_scalars(agent.exploration_statistics(), explores)
        self.last_sigma = scalars.get(EXPLORE_SIGMA_MEAN)
        actor_lr = strategy.optimizer_kwargs.get("lr") if strategy is not None else None
        if actor_lr is not None:
            scalars.update(learning_rate_scalars(actor_lr, self.config.learner.critic_lr))
        return scalars

    def _show_progress(self, step: int) -> None:
        """The bar's speed and latest eval."""
        self._set_postfix()

    def _says_status(self) -> bool:
        """Whether this run writes status lines: a run of its own with lines, or the member
        of a population that says the population's (:meth:`PopulationLines.speaks`)."""
        return self._status_lines and (self.population is None or self.population.speaks(self))

    def _status_due(self, step: int) -> bool:
        """A status line is due at the run's next :data:`STATUS_FRACTION`, or (looked at
        every 100 steps: a clock read per step would cost more than it tells)
        :data:`STATUS_SECONDS` after the run's last line."""
        if step - self._status_step >= self._status_every:
            return True
        return (
            step % 100 == 0
            and step > self._status_step
            and time.monotonic() - self._status_at >= STATUS_SECONDS
        )

    def _write_status(self, step: int) -> None:
        """The run's status line: steps done, speed, the latest evaluation and σ (its
        population's, for a member of one)."""
        total = self.config.total_steps
        status = [f"step {step}/{total} ({step / total:.0%})"]
        elapsed = time.perf_counter() - self._clock
        # The throughput since the last logged one (evaluations excluded), else that one.
        speed = (step - self._clock_step) / elapsed if step > self._clock_step else self._speed
        if self.population is not None:
            self.population.status(step, total, speed)
            self._status_at, self._status_step = time.monotonic(), step
            return
        if speed is not None:
            status.append(f"{speed:.0f} steps/s")
        if self.last_eval is not None:
            status.append(f"last eval return {self.last_eval:.1f}")
        if self.last_sigma is not None:
            status.append(f"σ {sigma_text(self.last_sigma)}")
        self._write(", ".join(status))
        self._status_step = step

    def _set_postfix(self) -> None:
        postfix = {} if self._speed is None else {"steps/s": f"{self._speed:.0f}"}
        if self.last_eval is not None:
            postfix["eval"] = f"{self.last_eval:.1f}"
        self.bar.set_postfix(postfix, refresh=False)

    def _evaluate(self, agent: RunnableAgent, step: int) -> None:
        started = time.perf_counter()
        seed = self.config.seed + EVAL_SEED_OFFSET
        self._evaluating = True
        final_infos: list[dict] = []
        try:
            mean, std = self.test_episodes(agent, seed, final_infos)
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
        sigma = "" if self.last_sigma is None else f", σ {sigma_text(self.last_sigma)}"
        if self.population is not None:
            self.population.evaluated(step, mean, success, self.last_sigma)
            self._status_at = time.monotonic()
        else:
            self._write(
                f"step {step}: eval return {mean:.1f} ± {std:.1f} ({episodes} ep{succeeded}){sigma}"
            )
        self._set_postfix()  # the evaluation's line is the run's status line too
        # Evaluation time is not training time: restart the throughput clock.
        self._clock += time.perf_counter() - started

    def _write(self, line: str) -> None:
        """One line of the run's log, naming the run: plain on a pipe, above the bar on a
        terminal."""
        self._status_at = time.monotonic()  # any line of the run is a status line too
        self.write_line(f"{self.name} {line}")

    def write_line(self, line: str) -> None:
        """``line`` as it is: plain on a pipe, above the bar on a terminal."""
        if self.bar.disable:
            print(line, flush=True)
        else:
            self.bar.write(line)

    def checkpoint(self, agent: RunnableAgent) -> None:
        """Write the agent's state, with the run's settings (a resume checks against them)."""
        metadata = {
            "run_config": self.config.values(),
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
        space = agent.env.observation_space  # (the run's env: no env built for the probe)
        obs = np.clip(np.zeros(space.shape), space.low, space.high).astype(space.dtype)
        action = agent.predict(obs, True)
        if not np.isfinite(action).all():
            raise NonFiniteDataError(
                f"not saved to {self.checkpoint_path}: at step {agent.num_timesteps} the "
                f"policy's action is not finite ({np.asarray(action).tolist()}; an update "
                "diverged: a learning rate too large?)"
            )

    def checkpoint_last_good(self, agent: RunnableAgent, good_until: int | None = None) -> str:
        """After a failure: checkpoint the state if it is a good one; say where the run
        can continue from. ``good_until``: a failure found after the fact (its step's rows
        read at a boundary), the last good step; the state trained past it is not kept."""
        previous = f"{self.checkpoint_path} holds step {self.checkpoint_step}"
        if good_until is not None and good_until < agent.num_timesteps:
            return (
                f"the state trained past step {good_until} is not checkpointed; the last "
                f"checkpoint stays: {previous}"
            )
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

"""``train_agent``: train DDPG with a parameter-exploration strategy from the command line.

    train_agent --env HalfCheetah-v4 --opt vadam          # the paper's setting
    tensorboard --logdir runs/HalfCheetah-v4              # compare strategies

Bad input (unknown env or strategy, non-Box action space, broken YAML, unknown ``--set``
key, non-positive counts, settings that cannot fit in memory), a run directory that cannot
be used (written by another process, a file of it missing or damaged, a read-only or full
disk) and a failing environment end with one ``train_agent: error: ...`` line and exit
code 2; ``--check`` runs the same checks (:func:`_check_runs`) and trains nothing. Ctrl-C
and SIGTERM stop after a checkpoint: exit code 130 and 143, with one line saying it stopped
and the command that continues it. A grid some of whose runs failed (or were lost with
their worker, or stopped by a signal of their own) exits 1. ``--track`` logs each run to
Weights & Biases as well (:mod:`agents.runs.tracking`).
"""

from __future__ import annotations

import argparse
import shlex
import signal
import sys
from pathlib import Path

import gymnasium as gym
import torch

from .common.critic_posterior import critic_optimizers
from .common.errors import ConfigError, os_error_message
from .common.flags import OneLineParser, whole_number
from .common.strategies import available_strategies
from .curiosity.registry import BONUSES
from .reporting.live_aggregates import StrategyMeansAsRunsEvaluate
from .reporting.strategy_aggregates import tensorboard_view, write_strategy_aggregates
from .runs.agent_factory import check_runs_env, learner_module, make_task_env
from .runs.closed_stdout import run_on_without_stdout
from .runs.grid import (
    RunOutcome,
    check_grid,
    run_grid,
    single_run_threads,
    threads_per_worker,
)
from .runs.resume import trained_eval_every
from .runs.stopping import RunInterrupted, interrupt_on_signals
from .runs.tracking import Tracking, check_tracking
from .runs.train import train
from .settings import RunSettings
from .settings.resolve import resolve_runs

#: Other tools' names for flags that mean the same here: CleanRL's ``--env-id`` and
#: ``--total-timesteps`` (environment steps of the one run), rl-zoo3's ``-n/--n-timesteps``
#: (SB3's ``total_timesteps``) and ``--eval-freq`` (environment steps between evaluations).
ALIASES: dict[str, tuple[str, ...]] = {
    "--env": ("--env-id",),
    "--steps": ("--total-timesteps", "--n-timesteps", "-n"),
    "--eval-every": ("--eval-freq",),
}


def aliased(flag: str) -> tuple[str, ...]:
    """``flag`` and the names CleanRL and rl-zoo3 users know it by (:data:`ALIASES`)."""
    return (flag, *ALIASES.get(flag, ()))


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="train_agent",
        hint="a setting without a flag of its own is given as --set KEY=VALUE",
        description="Train DDPG whose actor explores by sampling its weights "
        "(Khan et al. 2018, Appendix K). Defaults reproduce the paper's setting.",
    )
    parser.add_argument(
        *aliased("--env"), help="gymnasium env id with a Box action space (default HalfCheetah-v4)"
    )
    parser.add_argument(
        "--opt",
        nargs="+",
        help=f"exploration strategy: {', '.join(available_strategies())} "
        "(default vadam); several (--opt a b, or a,b), or 'all', run a grid",
    )
    parser.add_argument(
        "--critic-opt",
        dest="critic_optimizer",
        choices=critic_optimizers(),
        help="the critic's optimizer: adam (default), or a posterior whose held sample moves "
        "the acting action (Thompson sampling, docs/decisions.md#variational-critic)",
    )
    seeds = parser.add_mutually_exclusive_group()
    seeds.add_argument("--seed", type=int, help="random seed (default 0)")
    seeds.add_argument(
        "--seeds",
        nargs="+",
        help="a grid over seeds: a count (5 = seeds 0-4) or a list (--seeds 0 3 7, or 0,3,7)",
    )
    parser.add_argument(
        *aliased("--steps"),
        type=whole_number,
        dest="total_steps",
        metavar="STEPS",
        help="environment steps in total (default 3000000; 1e6 is a whole number too)",
    )
    parser.add_argument(
        *aliased("--eval-every"),
        type=whole_number,
        dest="eval_every",
        metavar="STEPS",
        help="steps between evaluations (10000; with a shorter --steps, a tenth of it)",
    )
    parser.add_argument("--eval-episodes", type=int, help="episodes per evaluation (20)")
    parser.add_argument("--logdir", help="root of run directories (default runs)")
    parser.add_argument("--device", choices=["auto", "cpu", "cuda"], help="default auto")
    parser.add_argument(
        "--resume",
        action="store_true",
        help="continue the run in its directory from its last checkpoint",
    )
    parser.add_argument(
        "--config",
        metavar="FILE",
        action="append",
        help="YAML file overriding the defaults (repeatable: each a layer over the one before)",
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        dest="set_options",
        help="override one config key, e.g. --set batch_size=128 or "
        "--set optimizer_kwargs.lr=3e-4 (repeatable)",
    )
    parser.add_argument(
        "--engine",
        choices=["native", "sb3"],
        help="native DDPG, or SB3's DDPG with ParamExplorePolicy (default native)",
    )
    parser.add_argument(
        "--algo",
        choices=["ddpg", "trpo"],
        help="the learner: ddpg (default), or trpo: sb3-contrib's TRPO (needs --engine sb3), "
        "exploring through its own Gaussian policy (no --opt; settings as --set "
        "trpo.n_steps=N, docs/sb3.md)",
    )
    parser.add_argument(
        "--compile",
        action=argparse.BooleanOptionalAction,
        help="native engine: run each update as one compiled graph (the default; compiles for "
        "seconds at the first update)",
    )
    parser.add_argument(
        "--bonus",
        choices=list(BONUSES),
        help="a curiosity bonus on the reward, e.g. vime: VIME's information gain (settings "
        "as --set bonus.posterior=noisy-kfac etc., docs/vime.md); default none",
    )
    parser.add_argument(
        "--no-progress", action="store_true", help="no progress bar (a grid: no status lines)"
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="resolve and check the settings and make each env once, print the run "
        "directories, and train nothing",
    )
    grid = parser.add_argument_group("grids (several strategies or seeds)")
    grid.add_argument("--workers", type=int, help="runs in parallel (default 1)")
    grid.add_argument("--backend", choices=["local", "ray"], help="default local")
    grid.add_argument("--address", help="Ray cluster address (default: start a local Ray)")
    grid.add_argument(
        "--no-population",
        dest="population",
        action="store_false",
        help="one process per run: by default the runs of a strategy that differ only in "
        "their seed (and per-member numbers) train together as a population",
    )
    track = parser.add_argument_group("experiment tracking (Weights & Biases, docs/manual.md)")
    track.add_argument(
        "--track",
        action="store_true",
        help="log each run to W&B too: its settings and the TensorBoard scalars "
        "(pip install 'param-explore[track]'; WANDB_MODE=offline needs no account)",
    )
    track.add_argument("--wandb-project", help="W&B project (default param-explore)")
    track.add_argument("--wandb-entity", help="W&B entity: team or user (default: W&B's)")
    track.add_argument(
        "--wandb-group",
        help="W&B group (default: the run's strategy, so that W&B aggregates its seeds)",
    )
    return parser


def _listed(values: list[str]) -> list[str]:
    """A list flag's items, given as separate words (``--opt a b``, as argparse users
    write), comma-separated (``--opt a,b``), or both."""
    return [item.strip() for value in values for item in value.split(",") if item.strip()]


def _tracking(args: argparse.Namespace) -> Tracking | None:
    """``--track``'s W&B settings, or None; a ``--wandb-*`` flag without it is refused."""
    given = [f"--wandb-{name}" for name in ("project", "entity", "group")
             if getattr(args, f"wandb_{name}") is not None]  # fmt: skip
    if not args.track:
        if given:
            raise ConfigError(f"{given[0]} applies with --track only")
        return None
    return Tracking(args.wandb_project, args.wandb_entity, args.wandb_group)


def _strategies(opt: list[str] | None) -> list[str | None]:
    if opt is None:
        return [None]
    names = _listed(opt)
    if not names:  # ``--opt ''`` or ``--opt ,``: a grid of no run would train nothing
        raise ConfigError(f"--opt names no strategy (got {' '.join(opt)!r})")
    return available_strategies() if names == ["all"] else list(names)


def _seeds(seed: int | None, seeds: list[str] | None) -> list[int | None]:
    if seeds is None:
        return [seed]
    try:
        values = [int(v) for v in _listed(seeds)]
    except ValueError:
        given = " ".join(seeds)
        raise ConfigError(f"--seeds expects a count or a list of integers, got {given!r}") from None
    if not values:  # ``--seeds ''`` or ``--seeds ,``: a grid of no run would train nothing
        raise ConfigError(f"--seeds names no seed (got {' '.join(seeds)!r})")
    if len(values) == 1:
        if values[0] <= 0:
            raise ConfigError(f"--seeds count must be > 0, got {values[0]}")
        return list(range(values[0]))
    return values


def main(argv: list[str] | None = None) -> int:
    run_on_without_stdout()  # a closed stdout silences progress, it does not stop a run
    parser = build_parser()
    args = parser.parse_args(argv)
    configs: list = []
    notes: list[str] = []
    try:
        configs = resolve_runs(
            _strategies(args.opt),
            _seeds(args.seed, args.seeds),
            config_file=args.config,
            set_options=args.set_options,
            notes=notes,
            saved_eval_every=trained_eval_every,
            env=args.env,
            total_steps=args.total_steps,
            eval_every=args.eval_every,
            eval_episodes=args.eval_episodes,
            logdir=args.logdir,
            device=args.device,
            engine=args.engine,
            algo=args.algo,
            compile=args.compile,
            critic_optimizer=args.critic_optimizer,
            bonus={"kind": args.bonus} if args.bonus else None,
        )
        for note in notes:
            print(note)
        grid = _is_grid(configs, args)
        tracking = _tracking(args)
        _check_runs(configs, args, grid)
        if args.check:
            for config in configs:
                print(f"{config.run_dir()}: settings checked, nothing trained")
            return 0
        if not grid:
            torch.set_num_threads(single_run_threads())
            run_dir = train(
                configs[0], args.resume, not args.no_progress, tracking=tracking, checked=True
            )
            print(f"run directory: {run_dir}")
            return 0
        return _grid(configs, args, tracking)
    except ConfigError as err:
        parser.exit(2, f"train_agent: error: {err}\n")
    except OSError as err:  # the file system's own refusal, e.g. of a --config file
        parser.exit(2, f"train_agent: error: {os_error_message(err)}\n")
    except RunInterrupted as stop:
        print(f"\ntrain_agent: {_stopped(stop, argv, _is_grid(configs, args))}", file=sys.stderr)
        return stop.exit_code
    except KeyboardInterrupt:  # a second Ctrl-C: stopped at once
        print(
            "\ntrain_agent: interrupted at once, without a new checkpoint; the last one "
            "stays (continue with --resume)",
            file=sys.stderr,
        )
        return 130


def _stopped(stop: RunInterrupted, argv: list[str] | None, grid: bool) -> str:
    """What a stop the user asked for (Ctrl-C, SIGTERM) left, and the command that
    continues it: a stop, not a failure."""
    what = "interrupted" if stop.signum == signal.SIGINT else "terminated"
    words = list(sys.argv[1:] if argv is None else argv)
    if grid:  # every run of a grid resumes or is skipped: the same command continues it
        return (
            f"stopped ({what}): running runs checkpointed, queued runs not started; "
            f"to continue, run the same command: {shlex.join(['train_agent', *words])}"
        )
    if "--resume" not in words:
        words.append("--resume")
    command = shlex.join(["train_agent", *words])
    return f"stopped ({what}), checkpoint written; to continue: {command}"


def _is_grid(configs: list[RunSettings], args: argparse.Namespace) -> bool:
    """Whether the command runs a grid (several runs, or workers or a backend asked for)."""
    return len(configs) > 1 or args.workers is not None or args.backend is not None


def _workers(args: argparse.Namespace) -> int:
    """``--workers`` as given (0 and below are refused, not taken for the default 1)."""
    return 1 if args.workers is None else args.workers


def _check_runs(configs: list[RunSettings], args: argparse.Namespace, grid: bool) -> None:
    """Every check the command makes before a run starts, for ``--check`` and the command
    alike (one path, so ``--check`` approves nothing the command refuses), each once: the
    grid's own (workers, backend, each run directory once), each optional learner, and each
    run on its env (:func:`check_runs_env`: an unknown id or a setting the env refuses,
    episodes that never end, settings that do not fit in memory), once per env and per run
    shape (runs that differ only in their seed need the same). One ConfigError line
    otherwise. What the command then trains is not checked again (``checked``)."""
    if grid:
        check_grid(configs, _workers(args), args.backend or "local")
    if args.track:
        check_tracking()
    envs: dict[str, gym.Env] = {}
    shapes: set[str] = set()
    try:
        for config in configs:
            learner_module(config)
            key = repr((config.env, config.env_kwargs, config.max_episode_steps,
                        config.normalize_actions))  # fmt: skip
            if key not in envs:
                envs[key] = make_task_env(config)
            shape = repr(sorted((k, v) for k, v in config.values().items() if k != "seed"))
            if shape not in shapes:
                shapes.add(shape)
                check_runs_env([config], envs[key])
    finally:
        for env in envs.values():
            env.close()


def _grid(configs: list, args: argparse.Namespace, tracking: Tracking | None) -> int:
    """Run a grid; every run resumes or skips what an earlier call of the command did."""
    total, workers = len(configs), _workers(args)
    threads = threads_per_worker(workers)
    print(
        f"grid of {total} runs, {workers} worker(s) with {threads} torch thread(s) each, "
        f"{args.backend or 'local'}"
    )
    env_dirs = sorted({Path(c.logdir) / c.env for c in configs})
    for env_dir in env_dirs:
        print(f"each strategy's mean as its runs evaluate: {tensorboard_view(env_dir)}")

    def report(outcome: RunOutcome) -> None:
        if outcome.ok:
            status = "ok"
        elif outcome.stopped:  # the user's stop, not the run's failure
            status = f"stopped ({outcome.message})"
        else:
            status = f"FAILED: {outcome.message}"
        print(f"  {outcome.run_dir}: {status}", flush=True)

    with interrupt_on_signals(), StrategyMeansAsRunsEvaluate(env_dirs):
        outcomes = run_grid(
            configs,
            workers,
            args.backend or "local",
            args.address,
            report,
            args.population,
            progress=False if args.no_progress else "lines",
            tracking=tracking,
            checked=True,  # by _check_runs
        )
    failed = [o for o in outcomes if not o.ok and not o.stopped]
    stopped = [o for o in outcomes if o.stopped]  # a worker's own SIGTERM: run the command again
    finished = total - len(failed) - len(stopped)
    also = f", {len(stopped)} stopped" if stopped else ""
    print(f"{finished} of {total} runs finished, {len(failed)} failed{also}")
    for env_dir in env_dirs:
        skipped: list[str] = []
        if env_dir.is_dir() and write_strategy_aggregates(env_dir, skipped=skipped):
            print(
                "strategy aggregates (mean, 95 % bootstrap band), one curve per strategy: "
                f"{tensorboard_view(env_dir)}"
            )
        for reason in skipped:  # the run's failure, if this grid's, is reported above
            print(f"  strategy aggregates leave out what cannot be read: {reason}")
    return 1 if failed or stopped else 0


if __name__ == "__main__":
    sys.exit(main())

"""``train_agent``: train DDPG with a parameter-exploration strategy from the command line.

    train_agent --env HalfCheetah-v4 --opt vadam          # the paper's setting
    tensorboard --logdir runs/HalfCheetah-v4              # compare strategies

Bad input (unknown env or strategy, non-Box action space, broken YAML, unknown ``--set``
key, non-positive counts) ends with one ``train_agent: error: ...`` line and exit code 2.
"""

from __future__ import annotations

import argparse
import sys

import param_explore

from .config import resolve_config
from .errors import ConfigError
from .training import train


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="train_agent",
        description="Train DDPG whose actor explores by sampling its weights "
        "(Khan et al. 2018, Appendix K). Defaults reproduce the paper's setting.",
    )
    parser.add_argument(
        "--env", help="gymnasium env id with a Box action space (default HalfCheetah-v4)"
    )
    parser.add_argument(
        "--opt",
        help=f"exploration strategy: {', '.join(param_explore.available_optimizers())} "
        "(default vadam)",
    )
    parser.add_argument("--seed", type=int, help="random seed (default 0)")
    parser.add_argument(
        "--steps", type=int, dest="total_steps", help="environment steps in total (default 3000000)"
    )
    parser.add_argument("--eval-every", type=int, help="steps between evaluations (10000)")
    parser.add_argument("--eval-episodes", type=int, help="episodes per evaluation (20)")
    parser.add_argument("--logdir", help="root of run directories (default runs)")
    parser.add_argument("--device", choices=["auto", "cpu", "cuda"], help="default auto")
    parser.add_argument(
        "--resume",
        action="store_true",
        help="continue the run in its directory from its last checkpoint",
    )
    parser.add_argument("--config", metavar="FILE", help="YAML file overriding the defaults")
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
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        config = resolve_config(
            optimizer=args.opt,
            config_file=args.config,
            set_options=args.set_options,
            env=args.env,
            seed=args.seed,
            total_steps=args.total_steps,
            eval_every=args.eval_every,
            eval_episodes=args.eval_episodes,
            logdir=args.logdir,
            device=args.device,
            engine=args.engine,
        )
        run_dir = train(config, resume=args.resume, progress=not args.no_progress)
    except ConfigError as err:
        parser.exit(2, f"train_agent: error: {err}\n")
    except KeyboardInterrupt:
        print(
            "\ntrain_agent: interrupted; checkpoint written, continue with --resume",
            file=sys.stderr,
        )
        return 130
    print(f"run directory: {run_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

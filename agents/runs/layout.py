"""A run directory: what it holds, and whether it holds results.

``<logdir>/<env>/<strategy>[+<bonus>][-sb3]/seed<k>/``::

    config.yaml              the resolved settings (``agents.settings``)
    events.out.tfevents.*    TensorBoard scalars (tags in ``run_logger``)
    eval.csv                 the evaluation curve
    explore.csv              the explore/ scalars per logging window, from the events,
                             written when training stops (``explore_log``)
    checkpoints/latest.pt    networks, targets, both optimizers, RNGs, counters, the run's
                             settings (+ replay buffer with ``save_replay_buffer``); data
                             only, for every learner
    .lock                    while a process writes the run (``run_lock``)
    wandb_run_id             with ``--track``: the run's W&B run, which a resume continues
                             (``tracking``)

Checkpoints are written when a run starts (step 0), at the first episode end after every
``checkpoint_every`` steps, at the end of training, on Ctrl-C and SIGTERM, and when the
environment fails or gives a non-finite number — never of a state that is not finite.
With ``algo: trpo`` "the end of an episode" is the end of a rollout (its update done): a
due checkpoint and a stop request wait for it, and a failure inside a rollout keeps the
last checkpoint (:mod:`agents.sb3.trpo_agent`).
"""

from __future__ import annotations

from pathlib import Path

from .run_logger import EVAL_CSV

CHECKPOINT_DIR = "checkpoints"
#: The checkpoint in it, every learner's (``checkpoint_name``).
CHECKPOINT_FILE = "latest.pt"
CONFIG_FILE = "config.yaml"
#: The sb3 engine's checkpoint of earlier versions: SB3's own zip, never loaded.
LEGACY_SB3_CHECKPOINT = "latest.zip"


def has_results(run_dir: Path) -> bool:
    """Whether ``run_dir`` holds results (an ``eval.csv`` or TensorBoard events)."""
    return (run_dir / EVAL_CSV).exists() or any(run_dir.glob("events.out.tfevents.*"))

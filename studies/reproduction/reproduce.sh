#!/usr/bin/env bash
# The reproduction study of Khan et al. 2018 (Appendix K) on HalfCheetah-v4, and its report.
#
#   bash studies/reproduction/reproduce.sh            # everything: both grids, figure, tables
#   STEPS=300000 bash studies/reproduction/reproduce.sh   # extend the runs (needs their checkpoints)
#   REPORT_ONLY=1 bash studies/reproduction/reproduce.sh  # figures, tables and interval estimates
#                                                      # from the committed CSVs (no training)
#
# Resumable: every run of a grid continues from its checkpoint, and a run whose eval.csv
# already reaches the last evaluation is skipped, so re-running completes an interrupted
# study and, in a fresh clone, redoes nothing that is committed. Runs write into
# studies/reproduction/runs/; only their eval.csv and config.yaml are committed (.gitignore).
set -euo pipefail
cd "$(dirname "$0")"

STEPS=${STEPS:-100000}
WORKERS=${WORKERS:-2}
SIX=vadam,vadagrad,adam-plain,adam-explore,sgd-plain,sgd-explore

if [ -z "${REPORT_ONLY:-}" ]; then
  # The replay buffer is checkpointed so that a run extended later (STEPS=300000) continues
  # exactly as an uninterrupted one would.
  common=(--env HalfCheetah-v4 --steps "$STEPS" --workers "$WORKERS" --compile
          --set save_replay_buffer=true)
  # 1. The six strategies of the paper, the released code's initialisation (the default):
  #    seeds 0-4 as the paper, 5-9 to judge the reproduction against both released runs.
  train_agent --opt "$SIX" --seeds 10 "${common[@]}" --logdir runs/khan2018-init
  # 2. The initialisation ablation: Vadam and Adam-Plain from Lillicrap et al.'s scheme.
  train_agent --opt vadam,adam-plain --seeds 5 "${common[@]}" --set init=lillicrap \
    --logdir runs/lillicrap-init
  # 3. The other strategies beside Vadam and Adam-Plain: parameter noise, noisy Adam, noisy
  #    K-FAC (which trains eagerly: it has no compiled form).
  train_agent --opt param-noise,noisy-adam,noisy-kfac --seeds 5 "${common[@]}" \
    --logdir runs/khan2018-init
  # 4. The ablation of Vadam's sigma: Adam on the mean with Vadam's initial weight noise,
  #    never adapted (fixed-noise), 10 seeds like Vadam and Adam-Plain.
  train_agent --opt fixed-noise --seeds 10 "${common[@]}" --logdir runs/khan2018-init
fi

# The report: the six against the published runs (run 1 = the paper's figure, run 2 = the
# authors' second run, and their pool of 10), Vadam and Adam-Plain alone (the paper's
# headline), the two initialisations, and the other strategies. Each writes mean ± s.e.
# tables and rliable's interval estimates (IQM, mean, P(X > Y), performance profiles;
# 95 % stratified-bootstrap intervals, 10 000 replicates, bootstrap seed 0).
compare_runs runs/khan2018-init/HalfCheetah-v4 --strategies "$SIX" --reference khan2018 \
  --at 50000,100000,200000,300000 --out .
compare_runs runs/khan2018-init/HalfCheetah-v4 --strategies vadam,adam-plain --reference khan2018 \
  --at 50000,100000,200000,300000 --out headline
compare_runs runs/khan2018-init/HalfCheetah-v4 runs/lillicrap-init/HalfCheetah-v4 \
  --labels "khan2018 init,lillicrap init" --strategies vadam,adam-plain \
  --at 50000,100000,200000,300000 --out init-ablation
compare_runs runs/khan2018-init/HalfCheetah-v4 \
  --strategies vadam,adam-plain,param-noise,noisy-adam,noisy-kfac \
  --at 50000,100000,200000,300000 --out strategies
compare_runs runs/khan2018-init/HalfCheetah-v4 --strategies vadam,fixed-noise,adam-plain \
  --at 50000,100000,200000,300000 --out sigma-ablation

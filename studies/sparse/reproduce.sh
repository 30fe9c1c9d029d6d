#!/usr/bin/env bash
# The sparse-reward study (studies/sparse/README.md): six DDPG strategies x 5 seeds x five tasks, with
# Plappert et al. 2018's settings for these tasks (configs/sparse-study.yaml: 64-64 networks),
# and its report.
#
#   bash studies/sparse/reproduce.sh                  # every grid, then the report
#   STEPS=200000 bash studies/sparse/reproduce.sh     # extend the runs (needs their checkpoints)
#   REPORT_ONLY=1 bash studies/sparse/reproduce.sh    # the report from the committed CSVs
#                                                  # (no training)
#   TASKS="SparseMountainCar-v0" bash studies/sparse/reproduce.sh   # one task's grid (and report)
#
# Resumable: every run of a grid continues from its checkpoint, and a run whose eval.csv
# already reaches the last evaluation is skipped, so re-running completes an interrupted
# study and, in a fresh clone, redoes nothing that is committed. Runs write into
# studies/sparse/runs/<task>/<strategy>/seed<k>/; only their eval.csv and config.yaml are
# committed (.gitignore).
set -euo pipefail
cd "$(dirname "$0")"

# 100 k steps per run: 200 episodes of T = 500, ten evaluations of 20 test episodes.
STEPS=${STEPS:-100000}
WORKERS=${WORKERS:-2}
SEEDS=${SEEDS:-5}
STRATEGIES=adam-plain,gaussian-action,ou-action,param-noise,vadam,noisy-adam
# Cheapest first, so that an interrupted study has whole tasks.
read -r -a TASKS <<< "${TASKS:-SparseMountainCar-v0 MountainCarContinuous-v0 \
SparseCartpoleSwingup-v0 SparseDoublePendulum-v0 SparseHalfCheetah-v5}"

if [ -z "${REPORT_ONLY:-}" ]; then
  for task in "${TASKS[@]}"; do
    # The replay buffer is checkpointed so that a run extended later (STEPS=...) continues
    # exactly as an uninterrupted one would.
    train_agent --config ../../configs/sparse-study.yaml --env "$task" --opt "$STRATEGIES" \
      --seeds "$SEEDS" --steps "$STEPS" --workers "$WORKERS" --compile \
      --set save_replay_buffer=true --logdir runs
  done
fi

# The report: every task scored by its test episodes' success rate (eval.csv's success_rate),
# per task and aggregated across tasks, with rliable's interval estimates (IQM, mean,
# P(X > Y), performance profiles; 95 % stratified-bootstrap intervals, 10 000 replicates,
# bootstrap seed 0), the return curves and mean ± s.e. tables.
dirs=()
for task in "${TASKS[@]}"; do
  if [ -d "runs/$task" ]; then dirs+=("runs/$task"); fi
done
compare_runs "${dirs[@]}" --strategies "$STRATEGIES" --at 50000,100000 --out .

#!/usr/bin/env bash
# Plappert et al. 2018's sparse comparison, redone with their DDPG in full (README.md beside
# this script): the six DDPG strategies of the sparse study x 10 seeds on both mountain cars
# (gymnasium's, SparseMountainCar-v0, and rllab's, SparseMountainCarRllab-v0) and the
# cart-pole swing-up, with configs/sparse-study.yaml (observation normalisation, the
# critic's LayerNorm and L2 penalty, 50 updates every 100 steps, actions in [-1, 1]), and
# its report. Each strategy's 10 seeds train as one population (one batched process).
#
#   bash studies/plappert2018-sparse/reproduce.sh                  # every grid, then the report
#   REPORT_ONLY=1 bash studies/plappert2018-sparse/reproduce.sh    # the report from the committed CSVs
#   TASKS="SparseMountainCar-v0" bash studies/plappert2018-sparse/reproduce.sh   # one task
#
# Resumable: a run continues from its checkpoint (its replay buffer included, so an
# interrupted run continues as an uninterrupted one), a finished run is skipped. Runs write
# into runs/<task>/<strategy>/seed<k>/; their eval.csv, explore.csv and config.yaml are
# committed.
set -euo pipefail
cd "$(dirname "$0")"

# 100 k steps per run: 200 episodes of T = 500, ten evaluations of 20 test episodes (the
# anchors plot 1 M steps of the mountain car and 2.5 M of the cart-pole; README.md says
# what that limits).
STEPS=${STEPS:-100000}
WORKERS=${WORKERS:-2}
SEEDS=${SEEDS:-10}
STRATEGIES=adam-plain,gaussian-action,ou-action,param-noise,vadam,noisy-adam
read -r -a TASKS <<< "${TASKS:-SparseMountainCar-v0 SparseMountainCarRllab-v0 \
SparseCartpoleSwingup-v0}"

if [ -z "${REPORT_ONLY:-}" ]; then
  for task in "${TASKS[@]}"; do
    train_agent --config ../../configs/sparse-study.yaml --env "$task" --opt "$STRATEGIES" \
      --seeds "$SEEDS" --steps "$STEPS" --workers "$WORKERS" --compile \
      --set save_replay_buffer=true --logdir runs
  done
fi

# The report: success rate of the test episodes per strategy and task with rliable's
# interval estimates (IQM, mean, P(X > Y), performance profiles; 95 % stratified-bootstrap
# intervals, 10 000 replicates, bootstrap seed 0), the success and return curves, what the
# exploring policies reached (coverage) and how the weight noise's sigma moved.
dirs=()
for task in "${TASKS[@]}"; do
  if [ -d "runs/$task" ]; then dirs+=("runs/$task"); fi
done
compare_runs "${dirs[@]}" --strategies "$STRATEGIES" --at 50000,100000 --out .

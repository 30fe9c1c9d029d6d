#!/usr/bin/env bash
# Zhang et al. 2018, Fig. 3, redone (README.md beside this script): TRPO alone, TRPO + VIME
# with Bayes by Backprop (VIME as released) and TRPO + VIME with noisy K-FAC's matrix-variate
# posterior (NNG-MVG), on the three sparse tasks of VIME's experiments, 10 seeds each, with
# actions in [-1, 1] as rllab's NormalizedEnv gives them (configs/trpo.yaml), and its report.
#
#   bash studies/zhang2018-fig3/reproduce.sh                  # every grid, then the report
#   REPORT_ONLY=1 bash studies/zhang2018-fig3/reproduce.sh    # the report from the committed CSVs
#   TASKS="SparseMountainCarRllab-v0" bash studies/zhang2018-fig3/reproduce.sh   # one task
#
# Resumable: a run continues from its checkpoint, a finished run is skipped, so re-running
# completes an interrupted study. Runs write into runs/<task>/<method>/seed<k>/; their
# eval.csv, explore.csv and config.yaml are committed.
set -euo pipefail
cd "$(dirname "$0")"

SEEDS=${SEEDS:-10}
WORKERS=${WORKERS:-2}
# 50 TRPO updates of 5000 steps (VIME's batch of paths), a test of 20 episodes every 25 k
# steps: the budget this machine affords for 90 runs (the anchors' curves run for hundreds
# of iterations of up to 50 000 steps each; README.md says which of their claims that limits).
STEPS=${STEPS:-250000}
read -r -a TASKS <<< "${TASKS:-SparseMountainCarRllab-v0 SparseCartpoleSwingup-v0 \
SparseHalfCheetah-v5}"
METHODS=trpo-sb3,trpo+vime-bbb-sb3,trpo+vime-noisy-kfac-sb3

if [ -z "${REPORT_ONLY:-}" ]; then
  for task in "${TASKS[@]}"; do
    trpo=(train_agent --config ../../configs/trpo.yaml --engine sb3 --algo trpo --env "$task"
          --seeds "$SEEDS" --steps "$STEPS" --workers "$WORKERS" --set eval_every=25000
          --logdir runs)
    "${trpo[@]}"
    for posterior in bbb noisy-kfac; do
      "${trpo[@]}" --bonus vime --set "bonus.posterior=$posterior"
    done
  done
fi

# The report: success rate (test episodes reaching the goal) per method and task with
# rliable's interval estimates, the return and success curves, and Zhang et al.'s form of
# Fig. 3: the median over seeds of the test return with its interquartile range.
dirs=()
for task in "${TASKS[@]}"; do
  if [ -d "runs/$task" ]; then dirs+=("runs/$task"); fi
done
compare_runs "${dirs[@]}" --strategies "$METHODS" --at 100000,250000 --out . \
  --figure median-iqr

#!/usr/bin/env bash
# The VIME study (docs/vime.md): curiosity from a Bayesian dynamics model on the sparse tasks,
# with both policy learners of the anchors, and its report.
#
#   bash studies/vime/reproduce.sh                    # every grid, then the report
#   REPORT_ONLY=1 bash studies/vime/reproduce.sh      # the report from the committed CSVs
#                                                  # (no training)
#   TASKS="SparseMountainCar-v0" bash studies/vime/reproduce.sh   # one task
#   PARTS=trpo bash studies/vime/reproduce.sh         # only the TRPO grids and report (or
#                                                  # PARTS=ddpg)
#
# - TRPO (sb3-contrib, VIME's and Zhang et al.'s learner; configs/trpo.yaml): alone, with VIME
#   as released (bbb) and with VIME on noisy K-FAC's matrix-variate posterior (noisy-kfac).
# - DDPG (the native agent, configs/sparse-study.yaml as in the sparse study): adam-plain,
#   param-noise and vadam with VIME (noisy-kfac). The same strategies without the bonus are
#   the sparse study's runs (studies/sparse/reproduce.sh): same settings, same seeds, so they
#   are not run twice.
#
# Every run writes into the sparse study's tree, studies/sparse/runs/<task>/<method>/seed<k>/
# (methods trpo-sb3, trpo+vime-bbb-sb3, trpo+vime-noisy-kfac-sb3, <strategy>+vime-noisy-kfac),
# beside the strategies without the bonus, so TensorBoard shows them together. Resumable as
# the other studies: a run continues from its checkpoint, a finished run is skipped.
set -euo pipefail
cd "$(dirname "$0")"

SEEDS=${SEEDS:-5}
WORKERS=${WORKERS:-2}
# TRPO: 50 updates of 5000 steps (VIME's batch), a test of 20 episodes every 25 k steps.
TRPO_STEPS=${TRPO_STEPS:-250000}
# DDPG: the sparse study's budget, so that the runs without the bonus are its own.
DDPG_STEPS=${DDPG_STEPS:-100000}
DDPG_STRATEGIES=adam-plain,param-noise,vadam
read -r -a TASKS <<< "${TASKS:-SparseMountainCar-v0 SparseCartpoleSwingup-v0}"
read -r -a PARTS <<< "${PARTS:-trpo ddpg}"
for part in "${PARTS[@]}"; do  # checked before any training starts
  case "$part" in trpo | ddpg) ;; *) echo "unknown part $part (trpo, ddpg)" >&2; exit 2 ;; esac
done
RUNS=../sparse/runs

if [ -z "${REPORT_ONLY:-}" ]; then
  for task in "${TASKS[@]}"; do
    for part in "${PARTS[@]}"; do
      case "$part" in
        trpo)
          trpo=(train_agent --config ../../configs/trpo.yaml --engine sb3 --algo trpo
                --env "$task" --seeds "$SEEDS" --steps "$TRPO_STEPS" --workers "$WORKERS"
                --set eval_every=25000 --logdir "$RUNS")
          "${trpo[@]}"
          for posterior in bbb noisy-kfac; do
            "${trpo[@]}" --bonus vime --set "bonus.posterior=$posterior"
          done
          ;;
        ddpg)
          # The replay buffer (and with it the bonus's pool) is checkpointed so that an
          # interrupted run resumes exactly.
          train_agent --config ../../configs/sparse-study.yaml --env "$task" \
            --opt "$DDPG_STRATEGIES" --seeds "$SEEDS" --steps "$DDPG_STEPS" \
            --workers "$WORKERS" --compile --bonus vime --set bonus.posterior=noisy-kfac \
            --set save_replay_buffer=true --logdir "$RUNS"
          ;;
      esac
    done
  done
fi

# The report: per learner, every task scored by its test episodes' success rate, with rliable's
# interval estimates (95 % stratified-bootstrap intervals, 10 000 replicates, seed 0), the
# return and success curves and mean ± s.e. tables.
dirs=()
for task in "${TASKS[@]}"; do
  if [ -d "$RUNS/$task" ]; then dirs+=("$RUNS/$task"); fi
done
# One report per learner in PARTS (both by default).
for part in "${PARTS[@]}"; do
  case "$part" in
    trpo)
      compare_runs "${dirs[@]}" --out trpo --at 100000,250000 \
        --strategies trpo-sb3,trpo+vime-bbb-sb3,trpo+vime-noisy-kfac-sb3
      ;;
    ddpg)
      ddpg_methods=""
      for s in ${DDPG_STRATEGIES//,/ }; do ddpg_methods+="$s,$s+vime-noisy-kfac,"; done
      compare_runs "${dirs[@]}" --out ddpg --at 50000,100000 --strategies "${ddpg_methods%,}"
      ;;
  esac
done

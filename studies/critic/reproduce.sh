#!/usr/bin/env bash
# Where does optimizer-driven noise pay: on the actor, on the critic, or nowhere? (README.md
# beside this script.) The critic sampled from its posterior (--critic-opt: IVON, noisy Adam,
# Adam Langevin), its held sample moving each acting action along its gradient (Thompson
# sampling, docs/decisions.md#variational-critic), against the actor's IVON as preset, a fixed
# sigma and no noise, on fresh seeds 10-19, every arm trained by one commit, 100 k steps:
#   SparseCartpoleSwingup-v0, SparseMountainCar-v0 (configs/sparse-study.yaml; the actor's
#     noise one sample per episode, as the sigma and IVON studies ran them);
#   Hopper-v4 (Khan et al.'s protocol, one sample per step).
# A 100 k buffer holds every transition of a 100 k-step run; a sampled critic counts it as its
# data N. Then its reports.
#
#   bash studies/critic/reproduce.sh                  # every grid, then the reports
#   REPORT_ONLY=1 bash studies/critic/reproduce.sh    # the reports from the committed CSVs
#   TASKS="Hopper-v4" bash studies/critic/reproduce.sh   # one task
#   PILOT=1 bash studies/critic/reproduce.sh          # the pilot that chose the critics' settings
#   STEPS=400 SEEDS="10 11" TRAIN_ARGS="--no-compile --eval-every 200 --eval-episodes 1" \
#     bash studies/critic/reproduce.sh                # a check of the script, not the study
#
# Each arm's seeds train as one population (one batched process per worker). Resumable: a
# run continues from its checkpoint, a finished run is skipped. Runs write into
# runs/<task>/<arm>/seed<k>/; their eval.csv, explore.csv and config.yaml are committed.
set -euo pipefail
cd "$(dirname "$0")"

STEPS=${STEPS:-100000}
WORKERS=${WORKERS:-2}
read -r -a SEEDS <<< "${SEEDS:-10 11 12 13 14 15 16 17 18 19}"
seeds=(--seeds "${SEEDS[@]}")  # a list of seeds (one number alone would be a count)
if [ "${#SEEDS[@]}" -eq 1 ]; then seeds=(--seed "${SEEDS[0]}"); fi
read -r -a EXTRA <<< "${TRAIN_ARGS:-}"  # flags after the study's own (a check's budget)
read -r -a TASKS <<< "${TASKS:-SparseCartpoleSwingup-v0 SparseMountainCar-v0 Hopper-v4}"

settings() {  # a task's settings: the sparse study's, or Khan et al.'s on Hopper
  case "$1" in
    Hopper-v4) echo "--set buffer_size=100000" ;;
    *) echo "--config ../../configs/sparse-study.yaml --set buffer_size=100000 --set resample=episode" ;;
  esac
}

if [ -z "${REPORT_ONLY:-}" ] && [ -n "${PILOT:-}" ]; then
  # The critics' settings, on seeds 20-22 of the sparse cart-pole (other seeds than the
  # study's), 100 k steps: each posterior at its derived settings and at one other setting
  # of its step, at the default move of 0.3 half action ranges; IVON's critic at two larger
  # moves; the same actor with torch's Adam critic (pilot/README.md).
  read -r -a own <<< "$(settings SparseCartpoleSwingup-v0)"
  pilot=(train_agent "${own[@]}" --env SparseCartpoleSwingup-v0 --seeds 20 21 22
         --steps "$STEPS" --workers "$WORKERS" --compile --opt adam-plain --logdir pilot/runs)
  "${pilot[@]}" "${EXTRA[@]}" --critic-opt ivon \
    --set "critic_optimizer_kwargs.hess_init=[1e-5,0.1]"
  "${pilot[@]}" "${EXTRA[@]}" --critic-opt noisy-adam \
    --set "critic_optimizer_kwargs.damping=[0.0,0.01]"
  "${pilot[@]}" "${EXTRA[@]}" --critic-opt langevin
  "${pilot[@]}" "${EXTRA[@]}" --critic-opt ivon --set "critic_shift=[0.6,1.0]"
  "${pilot[@]}" "${EXTRA[@]}" --critic-opt adam  # the same actor, its critic unsampled
  exit 0
fi

# The study: every arm on every task, seeds 10-19. The fixed sigma_0 is the best of the sigma
# study's four on other seeds (0-9; README.md): 0.32 held per episode on both sparse tasks,
# 0.1 on Hopper (HalfCheetah's best; Hopper ran 0.1 alone there). The critics' settings are
# the pilot's choice (pilot/README.md).
CRITICS=(ivon noisy-adam langevin)
critic_settings() {  # a critic's settings over its derived ones, as the pilot chose them:
  # none (no other setting of a step or of the move did measurably better, pilot/README.md)
  echo ""
}
arm() {  # one arm's grid; runs that stop with their own error (a diverged update: exit 1,
  # each named with its last good checkpoint) leave the next arms to train, and their files
  # to the reports; any other failure stops the script
  local status=0
  "$@" || status=$?
  if [ "$status" -ne 0 ] && [ "$status" -ne 1 ]; then exit "$status"; fi
}
if [ -z "${REPORT_ONLY:-}" ] && [ -z "${PILOT:-}" ]; then
  for task in "${TASKS[@]}"; do
    read -r -a own <<< "$(settings "$task")"
    grid=(train_agent "${own[@]}" --env "$task" "${seeds[@]}" --steps "$STEPS"
          --workers "$WORKERS" --compile --set save_replay_buffer=true --logdir runs)
    case "$task" in
      Hopper-v4) precision=100 ;;  # sigma_0 = 0.1
      *) precision=10 ;;           # sigma_0 = 0.32
    esac
    for critic in "${CRITICS[@]}"; do
      read -r -a chosen <<< "$(critic_settings "$critic")"
      arm "${grid[@]}" "${EXTRA[@]}" --opt adam-plain --critic-opt "$critic" "${chosen[@]}"
    done
    arm "${grid[@]}" "${EXTRA[@]}" --opt ivon
    arm "${grid[@]}" "${EXTRA[@]}" --opt fixed-noise \
      --set "optimizer_kwargs.initial_precision=[$precision]"
    arm "${grid[@]}" "${EXTRA[@]}" --opt adam-plain
  done
fi

# The reports, per task once its last arm (no noise) is there — a task's arms are committed
# as they finish: success rate (sparse tasks) or return with rliable's intervals, final and
# over the curve, P(X > Y) between every two arms, state coverage (comparison.md); the
# critics' posterior spread at replayed and at distant states through training (spread.md).
# A run that stopped on its own error (a diverged critic) is left out of its arm's scores
# and named (--short-runs exclude); where one did (Hopper-v4, README.md), a second report
# scores it 0 from where it stopped: the two bracket what the failure costs its arm.
for task in "${TASKS[@]}"; do
  if [ -d "runs/$task/adam-plain" ]; then
    compare_runs "runs/$task" --at 50000,100000 --short-runs exclude --out "$task"
    if [ "$task" = Hopper-v4 ]; then
      compare_runs "runs/$task" --at 50000,100000 --short-runs zero --out "$task/failed-run-as-zero"
    fi
    python spread.py "runs/$task" --out "$task/spread.md"
  fi
done
if [ -d pilot/runs/SparseCartpoleSwingup-v0 ]; then
  compare_runs pilot/runs/SparseCartpoleSwingup-v0 --at 50000,100000 --out pilot
  python spread.py pilot/runs/SparseCartpoleSwingup-v0 --out pilot/spread.md
fi

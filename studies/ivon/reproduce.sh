#!/usr/bin/env bash
# Does a sigma adapted from curvature explore better than a fixed one? (README.md beside this
# script.) IVON (Shen et al. 2024; configs/ivon.yaml), whose sigma = 1/sqrt(ess (h + delta))
# follows a Hessian estimate h, with the sigma study's protocol, tasks and seeds, so that the
# sigma study's committed Vadam and fixed-noise runs are its comparison arms; 10 seeds each,
# 100 k steps:
#   HalfCheetah-v4 (Khan et al.'s protocol, one sample per step): IVON at sigma_0 = 0.1 and
#     0.032 (ess = 100, 1000), against ../sigma/runs' Vadam and fixed-noise at the same sigma_0;
#   SparseCartpoleSwingup-v0, SparseMountainCar-v0 (configs/sparse-study.yaml, one sample per
#     episode): IVON at sigma_0 = 0.32 and 0.1 (ess = 10, 100), against ../sigma/runs-episode;
#   Hopper-v4 (Khan et al.'s protocol; episodes end when it falls): IVON at sigma_0 = 0.1,
#     Vadam c = 100, fixed-noise sigma_0 = 0.1 and no noise (adam-plain), all trained here.
# Then its reports.
#
#   bash studies/ivon/reproduce.sh                  # every grid, then the reports
#   REPORT_ONLY=1 bash studies/ivon/reproduce.sh    # the reports from the committed CSVs
#   TASKS="Hopper-v4" bash studies/ivon/reproduce.sh   # one task
#   PILOT=1 bash studies/ivon/reproduce.sh          # the pilot that chose the preset's lr
#   python studies/ivon/diagnostics.py              # saturation and curvature at checkpoints
#   STEPS=400 SEEDS=2 TRAIN_ARGS="--no-compile --eval-every 200 --eval-episodes 1" \
#     bash studies/ivon/reproduce.sh                # a check of the script, not the study
#
# Each sweep's values x seeds train as one population (one batched process per worker).
# Resumable: a run continues from its checkpoint (its replay buffer included), a finished
# run is skipped. Runs write into runs/<task>/<strategy>@<setting>=<value>/seed<k>/ (one
# sample per step) and runs-episode/<task>/... (one per episode); their eval.csv,
# explore.csv and config.yaml are committed.
set -euo pipefail
cd "$(dirname "$0")"

STEPS=${STEPS:-100000}
WORKERS=${WORKERS:-2}
SEEDS=${SEEDS:-10}
read -r -a EXTRA <<< "${TRAIN_ARGS:-}"  # flags after the study's own (a check's budget)
read -r -a TASKS <<< "${TASKS:-HalfCheetah-v4 SparseCartpoleSwingup-v0 SparseMountainCar-v0 Hopper-v4}"
SIGMA=../sigma  # the sigma study: its runs are the Vadam and fixed-noise arms

settings() {  # a task's settings: the sparse study's, or Khan et al.'s on the MuJoCo tasks
  case "$1" in
    HalfCheetah-v4|Hopper-v4)
      # A 100 k buffer holds every transition of a 100 k-step run, as Khan et al.'s 1 M does
      # (the sigma study's setting).
      echo "--set buffer_size=100000" ;;
    *) echo "--config ../../configs/sparse-study.yaml" ;;
  esac
}

# IVON's two presets: the first (configs/ivon-wide-prior.yaml, a --config layer: the committed
# ivon@ess=* arms) and the variational reading (configs/ivon.yaml: ivon@weight_decay=* arms,
# sigma_0 = 1/sqrt(2 ess delta) = 0.32, 0.1, 0.032 at delta = 5e-6, 5e-5, 5e-4).
WIDE=../../configs/ivon-wide-prior.yaml

if [ -z "${REPORT_ONLY:-}" ] && [ -n "${PILOT:-}" ]; then
  # The variational preset's learning rate (configs/ivon.yaml): 3 values x 3 seeds on
  # HalfCheetah-v4 at 30 k steps, 5 test episodes per evaluation (pilot/README.md).
  (cd pilot && train_agent --env HalfCheetah-v4 --opt ivon --seeds 3 --steps 30000 \
    --set buffer_size=100000 --set "optimizer_kwargs.lr=[0.003,0.01,0.03]" \
    --eval-every 10000 --eval-episodes 5 --workers 1 --compile --logdir runs "${EXTRA[@]}")
fi

if [ -z "${REPORT_ONLY:-}" ] && [ -z "${PILOT:-}" ]; then
  for task in "${TASKS[@]}"; do
    read -r -a own <<< "$(settings "$task")"
    grid=(train_agent "${own[@]}" --env "$task" --seeds "$SEEDS" --steps "$STEPS"
          --workers "$WORKERS" --compile --set save_replay_buffer=true)
    case "$task" in
      HalfCheetah-v4)  # sigma_0 = 0.1, 0.032: the sigma study's best fixed sigma there
        "${grid[@]}" "${EXTRA[@]}" --logdir runs --opt ivon --config "$WIDE" \
          --set "optimizer_kwargs.ess=[100,1000]"
        "${grid[@]}" "${EXTRA[@]}" --logdir runs --opt ivon \
          --set "optimizer_kwargs.weight_decay=[5e-5,5e-4]"
        # no noise, for P(IVON > no noise): the sigma study ran none here
        "${grid[@]}" "${EXTRA[@]}" --logdir runs --opt adam-plain ;;
      Hopper-v4)  # the sigma study's HalfCheetah answer asked on a second dense task
        "${grid[@]}" "${EXTRA[@]}" --logdir runs --opt ivon --config "$WIDE" \
          --set "optimizer_kwargs.ess=[100]"
        "${grid[@]}" "${EXTRA[@]}" --logdir runs --opt vadam \
          --set "optimizer_kwargs.sample_constant=[100]"
        "${grid[@]}" "${EXTRA[@]}" --logdir runs --opt fixed-noise \
          --set "optimizer_kwargs.initial_precision=[100]"
        "${grid[@]}" "${EXTRA[@]}" --logdir runs --opt adam-plain
        "${grid[@]}" "${EXTRA[@]}" --logdir runs --opt ivon \
          --set "optimizer_kwargs.weight_decay=[5e-5]" ;;
      *)  # one sample per episode at sigma_0 = 0.32, 0.1: what paid on the sparse tasks
        "${grid[@]}" "${EXTRA[@]}" --logdir runs-episode --opt ivon --config "$WIDE" \
          --set resample=episode --set "optimizer_kwargs.ess=[10,100]"
        "${grid[@]}" "${EXTRA[@]}" --logdir runs-episode --opt ivon --set resample=episode \
          --set "optimizer_kwargs.weight_decay=[5e-6,5e-5]" ;;
    esac
  done
fi

# The reports: per task, IVON beside the arms of the same sigma_0 (success rate or return,
# final and over the curve, with rliable's intervals; P(X > Y) between every two arms) and
# what sigma did (sigma.{csv,png}: its percentiles over the actor's weights, each layer's
# median and the action distance through training).
# shellcheck source=../compare_labelled.sh
source ../compare_labelled.sh

has_task() { [[ " ${TASKS[*]} " == *" $1 "* ]]; }

if has_task HalfCheetah-v4; then
  compare_labelled HalfCheetah-v4 "ivon@ess=100,ivon@ess=1000,\
fixed-noise@initial_precision=100,fixed-noise@initial_precision=1000,\
vadam@sample_constant=100,vadam@sample_constant=1000" \
    runs/HalfCheetah-v4 ivon "$SIGMA/runs/HalfCheetah-v4" sigma
fi
sparse=()
for task in SparseCartpoleSwingup-v0 SparseMountainCar-v0; do
  if has_task "$task"; then
    sparse+=("runs-episode/$task" ivon "$SIGMA/runs-episode/$task" sigma)
  fi
done
compare_labelled sparse "ivon@ess=10,ivon@ess=100,fixed-noise@initial_precision=10,\
fixed-noise@initial_precision=100,vadam@sample_constant=10,vadam@sample_constant=100" \
  "${sparse[@]}"
# The variational preset's arms (configs/ivon.yaml) beside the same arms and the first
# preset's, in a report of their own (the one above stays as committed).
# No noise: Plappert et al.'s sparse study ran it with these settings, seeds and steps.
for task in SparseCartpoleSwingup-v0 SparseMountainCar-v0; do
  if has_task "$task"; then
    sparse+=("../plappert2018-sparse/runs/$task" plappert)
  fi
done
compare_labelled sparse-variational "ivon@weight_decay=5e-06,ivon@weight_decay=5e-05,\
ivon@ess=10,ivon@ess=100,fixed-noise@initial_precision=10,fixed-noise@initial_precision=100,\
vadam@sample_constant=10,vadam@sample_constant=100,adam-plain" "${sparse[@]}"
# HalfCheetah's the same way, once the variational arms are there.
if has_task HalfCheetah-v4 && [ -d runs/HalfCheetah-v4/ivon@weight_decay=5e-05 ]; then
  compare_labelled HalfCheetah-v4-variational "ivon@weight_decay=5e-05,\
ivon@weight_decay=0.0005,ivon@ess=100,ivon@ess=1000,fixed-noise@initial_precision=100,\
fixed-noise@initial_precision=1000,vadam@sample_constant=100,vadam@sample_constant=1000,\
adam-plain" runs/HalfCheetah-v4 ivon "$SIGMA/runs/HalfCheetah-v4" sigma
fi
# Hopper's report once its last arm (no noise) is there: its arms are committed as they finish.
if has_task Hopper-v4 && [ -d runs/Hopper-v4/adam-plain ]; then
  compare_runs runs/Hopper-v4 --at 50000,100000 --out Hopper-v4 --strategies \
    "adam-plain,fixed-noise@initial_precision=100,ivon@ess=100,vadam@sample_constant=100"
fi
# The variational preset's arm beside them, in a report of its own.
if has_task Hopper-v4 && [ -d runs/Hopper-v4/ivon@weight_decay=5e-05 ]; then
  compare_runs runs/Hopper-v4 --at 50000,100000 --out Hopper-v4-variational
fi
if [ -d pilot/runs/HalfCheetah-v4 ]; then
  compare_runs pilot/runs/HalfCheetah-v4 --at 10000,30000 --out pilot
fi
# Saturation and curvature at checkpoints, one seed per arm (python diagnostics.py trains and
# measures them; here only its report from the committed measurements).
if compgen -G "runs-diagnostics/*.csv" > /dev/null; then
  python diagnostics.py --report
fi

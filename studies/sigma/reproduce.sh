#!/usr/bin/env bash
# When does the optimizer's sigma matter? (README.md beside this script.) Vadam with its
# sampling constant c in {1e4, 1e3, 1e2, 1e1} (sigma_0 = 1/sqrt(c): 0.01, 0.03, 0.1, 0.32)
# against fixed-noise with the same sigma_0 never adapted (initial_precision = c), and Vadam
# with c = 1e4 and N = 1e3 (num_data: sigma_0 = 0.01 with the adaptation of c = 10), 10 seeds
# each, on SparseMountainCar-v0 and SparseCartpoleSwingup-v0 (configs/sparse-study.yaml)
# and HalfCheetah-v4 (Khan et al.'s protocol), 100 k steps; then its reports.
#
#   bash studies/sigma/reproduce.sh                  # every grid, then the reports
#   REPORT_ONLY=1 bash studies/sigma/reproduce.sh    # the reports from the committed CSVs
#   TASKS="SparseMountainCar-v0" bash studies/sigma/reproduce.sh   # one task
#
# Each sweep's values x seeds train as one population (one batched process per worker).
# Resumable: a run continues from its checkpoint (its replay buffer included), a finished
# run is skipped. Runs write into runs/<task>/<strategy>@<setting>=<value>/seed<k>/; their
# eval.csv, explore.csv and config.yaml are committed.
set -euo pipefail
cd "$(dirname "$0")"

STEPS=${STEPS:-100000}
WORKERS=${WORKERS:-2}
SEEDS=${SEEDS:-10}
VALUES="[1e4,1e3,1e2,1e1]"
read -r -a TASKS <<< "${TASKS:-SparseMountainCar-v0 SparseCartpoleSwingup-v0 HalfCheetah-v4}"
VADAM="vadam@sample_constant=10000,vadam@sample_constant=1000,vadam@sample_constant=100,\
vadam@sample_constant=10"
FIXED="fixed-noise@initial_precision=10000,fixed-noise@initial_precision=1000,\
fixed-noise@initial_precision=100,fixed-noise@initial_precision=10"
SWEEP="$VADAM,$FIXED,vadam@num_data=1000"

settings() {  # a task's settings: the sparse study's, or Khan et al.'s on HalfCheetah
  if [ "$1" = "HalfCheetah-v4" ]; then
    # A 100 k buffer holds every transition of a 100 k-step run, as Khan et al.'s 1 M does:
    # the same minibatches, a tenth of the memory per member.
    echo "--set buffer_size=100000"
  else
    echo "--config ../../configs/sparse-study.yaml"
  fi
}

if [ -z "${REPORT_ONLY:-}" ]; then
  for task in "${TASKS[@]}"; do
    read -r -a own <<< "$(settings "$task")"
    grid=(train_agent "${own[@]}" --env "$task" --seeds "$SEEDS" --steps "$STEPS"
          --workers "$WORKERS" --compile --set save_replay_buffer=true)
    "${grid[@]}" --logdir runs --opt vadam --set "optimizer_kwargs.sample_constant=$VALUES"
    "${grid[@]}" --logdir runs --opt fixed-noise \
      --set "optimizer_kwargs.initial_precision=$VALUES"
    "${grid[@]}" --logdir runs --opt vadam --set "optimizer_kwargs.num_data=[1000]"
    # One weight sample per episode (Khan et al. App. K, footnote 10), as parameter noise
    # holds its perturbation: whether the weight noise lacked size or temporal consistency;
    # fixed-noise the same way, to tell the adaptation from the consistency.
    if [ "$task" != "HalfCheetah-v4" ]; then
      "${grid[@]}" --logdir runs-episode --opt vadam --set resample=episode \
        --set "optimizer_kwargs.sample_constant=$VALUES"
      "${grid[@]}" --logdir runs-episode --opt fixed-noise --set resample=episode \
        --set "optimizer_kwargs.initial_precision=$VALUES"
    fi
  done
fi

# The reports. The sweep: per task, every c of Vadam beside fixed-noise of the same sigma_0
# (success rate or return with rliable's intervals, P(X > Y)), and what sigma did
# (sigma.{csv,png}: its percentiles over the actor's weights, each layer's median and the
# action distance through training).
dirs=()
for task in "${TASKS[@]}"; do
  if [ -d "runs/$task" ]; then dirs+=("runs/$task"); fi
done
compare_runs "${dirs[@]}" --strategies "$SWEEP" --at 50000,100000 --out sweep

# Labelled comparisons: run directories of one env told apart by a label after each strategy.
# shellcheck source=../compare_labelled.sh
source ../compare_labelled.sh

# One sample per step against one per episode, Vadam and fixed-noise at each c, on the
# sparse tasks.
pairs=()
for task in "${TASKS[@]}"; do
  if [ -d "runs-episode/$task" ]; then
    pairs+=("runs/$task" step "runs-episode/$task" episode)
  fi
done
compare_labelled resample "$VADAM,$FIXED" "${pairs[@]}"

# The best sigma_0 of each family beside the committed studies' baselines, trained with the
# same settings and seeds: on the sparse tasks one sample per episode at sigma_0 = 0.32 (the
# best arm of both families there) beside Plappert et al.'s comparison (no noise, OU action
# noise, parameter noise); on HalfCheetah the best c of each family by the mean return at
# 100 k (Vadam's 1e3, fixed-noise's 1e2) and Khan et al.'s c = 1e4 beside their reproduction
# (no noise, parameter noise).
sparse=()
for task in "${TASKS[@]}"; do
  if [ "$task" != "HalfCheetah-v4" ]; then
    sparse+=("runs-episode/$task" "per episode" "../plappert2018-sparse/runs/$task" plappert)
  fi
done
compare_labelled baselines/sparse "vadam@sample_constant=10,fixed-noise@initial_precision=10,\
adam-plain,ou-action,param-noise" "${sparse[@]}"
if [[ " ${TASKS[*]} " == *" HalfCheetah-v4 "* ]]; then
  compare_labelled baselines/HalfCheetah-v4 "vadam@sample_constant=1000,vadam@sample_constant=10000,\
fixed-noise@initial_precision=100,adam-plain,param-noise" runs/HalfCheetah-v4 sigma \
    ../reproduction/runs/khan2018-init/HalfCheetah-v4 reproduction
fi

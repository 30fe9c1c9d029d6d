#!/usr/bin/env bash
# The GPU check, one short script for a machine with a CUDA device: what bounds a
# population's step there, every figure packed into ONE file, $OUT/gpu_check.json
# (benchmarks/gpu_results.py: each stage's command, exit status, seconds, its benchmark's
# record and the end of its log; re-packed after every stage, so a script stopped part-way
# still returns what it measured). The whole script keeps within BUDGET seconds (420: a lent
# GPU has 15 device-minutes a session, its start and a rerun included); each stage within its
# own limit and what is left of BUDGET (a stage stopped at its limit still reports; one that
# would get less than MIN_STAGE s is skipped, and says so). The stages, in order:
#  1. warp_envs: benchmarks/warp_envs.py, the MuJoCo Warp env's env-steps/s for WORLDS (100
#     1000) worlds, which compiles the kernels every later stage loads from the cache;
#  2. whole_100: the population a user runs, timed end to end by benchmarks/timed_train.py:
#     train_agent --env HalfCheetah-v4 --opt vadam --seeds WHOLE_SEEDS (100) --workers 1
#     --device DEVICE --steps WHOLE_STEPS (10000) --eval-every WHOLE_STEPS — seed-steps/s end
#     to end (members x steps / wall seconds), seconds to the first step (the population's
#     starts line), steady-state seed-steps/s (its status lines), CPU cores kept busy;
#  3. whole_1000: the same with --seeds LARGE (1000) --steps LARGE_STEPS (2000) --set
#     buffer_size=100000 --eval-episodes 2: above all its seconds to the first step and its
#     steady state;
#  4. host_overhead: benchmarks/host_overhead.py at HOST_MEMBERS (10 200) members, this
#     machine's CPU: Python calls and seconds per step of a population with tiny networks;
#  5. device_step: benchmarks/device_step.py, a population's training step alone with the
#     preset's compiled update (DEVICE_EAGER=--eager: the eager one too) for DEVICE_MEMBERS
#     (1 100 1000) members, seed-steps/s and host<->device copies per step, its rows read at
#     its callbacks' boundaries and (DEVICE_EVERY=--every-step, the default) every step;
#  6. pytest: the CUDA cases (marker `cuda`) of the tests parametrized by device;
#  7. then, while BUDGET lasts: device_graph, device_step with --cuda-graph for GRAPH_MEMBERS
#     (1 100) members (the compiled update and the same with it and the members' acting
#     replayed from CUDA graphs, agents/ddpg/captured_call.py); device_step for the sparse car, benchmarks/population.py
#     (MEMBERS (100) members in-process, --peak: the compiled update's share of the GPU's
#     fp32 peak), the sparse tasks' device envs.
# The limits of stages 1-4 (WARP_LIMIT 90, WHOLE_LIMIT 170, LARGE_LIMIT 100, HOST_LIMIT 60 s)
# add up to BUDGET: the later stages (STAGE_LIMIT 120 s each) get what the first ones leave.
# Sizes and skips: an empty WORLDS, WHOLE_SEEDS, LARGE, HOST_MEMBERS, DEVICE_MEMBERS,
# GRAPH_MEMBERS, TESTS, MEMBERS skips its stage; *_STEPS and *_LIMIT (seconds) size them;
# EXTRA adds train_agent arguments to both whole runs (the dry run's small networks);
# TEST_WORKERS (4) the tests' processes. Without MuJoCo Warp (the `gpu` extra) its stages
# say so in one line and the whole runs step their envs on the host. The dry run below
# takes Warp's CPU backend, whose kernels compile at their first use (minutes;
# WARP_CACHE_PATH=DIR keeps them for the next).
#
#   bash benchmarks/gpu_check.sh                 # on the GPU machine, from the repo root
#   DEVICE=cpu BUDGET=3000 STAGE_LIMIT=600 WHOLE_LIMIT=600 LARGE_LIMIT=600 HOST_LIMIT=600 \
#     WORLDS=2 WARP_STEPS=3 WHOLE_SEEDS=2 WHOLE_STEPS=200 LARGE=3 LARGE_STEPS=100 \
#     EXTRA="--set hidden_sizes=[16,16] --eval-every 1000000" HOST_MEMBERS="2 4" HOST_STEPS=70 \
#     DEVICE_MEMBERS=2 DEVICE_STEPS=20 GRAPH_MEMBERS=2 MEMBERS=2 STEPS=300 TEST_WORKERS=0 \
#     bash benchmarks/gpu_check.sh               # a dry run of the script here (one evaluation
#                                                # a run, at its end)
#
# A GPU image that holds torch but not the project's other dependencies takes them as
# wheels made here (Python 3.12, manylinux x86-64; `GPU=1 bash benchmarks/gpu_wheels.sh .whl`),
# installed into /tmp/site first (no network): set WHEELS to that folder. A lent machine takes
# 64 MiB a call — the repo's tracked tree (~40 MB, most of it studies/, which this check does
# not read: move it aside for the calls) and the carried folders — and warp-lang alone packs
# to 79 MB, so the folder goes in two calls that follow each other within the machine's idle
# time (30 s): the first carries warp.tar.xz.aa and copies it to /tmp/stash, the second
# carries the rest and copies it back:
#   run(carry=[".gpuA"]): mkdir -p /tmp/stash && cp .gpuA/* /tmp/stash/
#   run(carry=[".gpuB"]): cp /tmp/stash/* .gpuB/; WHEELS=.gpuB bash benchmarks/gpu_check.sh
# (2026-11-27 on an H200: docs/speed.md, "On a GPU").
set -euo pipefail
cd "$(dirname "$0")/.."

OUT=${OUT:-gpu-check}
RESULTS=$OUT/gpu_check.json
DEVICE=${DEVICE:-cuda}
BUDGET=${BUDGET:-420}          # seconds for the whole script
MIN_STAGE=${MIN_STAGE:-30}     # a stage that would get fewer seconds is skipped
WORLDS=${WORLDS-100 1000}
WARP_STEPS=${WARP_STEPS:-100}
WARP_LIMIT=${WARP_LIMIT:-90}
WHOLE_SEEDS=${WHOLE_SEEDS-100}
WHOLE_STEPS=${WHOLE_STEPS:-10000}
WHOLE_LIMIT=${WHOLE_LIMIT:-170}
LARGE=${LARGE-1000}
LARGE_STEPS=${LARGE_STEPS:-2000}
LARGE_LIMIT=${LARGE_LIMIT:-100}
EXTRA=${EXTRA:-}               # more train_agent arguments for both whole runs
HOST_MEMBERS=${HOST_MEMBERS-10 200}
HOST_STEPS=${HOST_STEPS:-100}
HOST_LIMIT=${HOST_LIMIT:-60}
DEVICE_MEMBERS=${DEVICE_MEMBERS-1 100 1000}
DEVICE_STEPS=${DEVICE_STEPS:-300}
DEVICE_EAGER=${DEVICE_EAGER:-}  # --eager: the eager update timed too
DEVICE_EVERY=${DEVICE_EVERY---every-step}  # the rows read every step too (empty: not)
GRAPH_MEMBERS=${GRAPH_MEMBERS-1 100}  # device_graph: the update replayed from a CUDA graph
TESTS=${TESTS-cuda}            # pytest -k within the CUDA tests (-m cuda): a rerun's subset
MEMBERS=${MEMBERS-100}
STEPS=${STEPS:-3000}
PEAK=${PEAK---peak}            # PEAK= skips the update's timing
STAGE_LIMIT=${STAGE_LIMIT:-120}  # the later stages' limit
mkdir -p "$OUT"
# The stages' logs and records, packed into $RESULTS after each; the whole runs' directories.
WORK=$(mktemp -d)
# Warp's kernels for this device compile once into a cache of this check's own.
WARP_CACHE_PATH=${WARP_CACHE_PATH:-$WORK/warp}
export WARP_CACHE_PATH

if [ -n "${WHEELS:-}" ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site "$WHEELS"/*.whl
  # warp-lang as gpu_wheels.sh packs it for a lent machine: a tar.xz in parts, CUDA only.
  if compgen -G "$WHEELS/warp.tar.xz.*" > /dev/null; then
    cat "$WHEELS"/warp.tar.xz.* | python3 -c \
      "import sys, tarfile; tarfile.open(fileobj=sys.stdin.buffer, mode='r|xz').extractall('/tmp/site')"
  fi
  export PYTHONPATH=/tmp/site:$PWD${PYTHONPATH:+:$PYTHONPATH}
fi
export PYTHONUNBUFFERED=1
python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.cuda.is_available(),
  torch.cuda.get_device_name() if torch.cuda.is_available() else '')" | tee "$WORK/device.txt"
for name in DEVICE BUDGET WORLDS WARP_STEPS WHOLE_SEEDS WHOLE_STEPS LARGE LARGE_STEPS EXTRA \
  HOST_MEMBERS HOST_STEPS DEVICE_MEMBERS DEVICE_STEPS DEVICE_EAGER GRAPH_MEMBERS TESTS MEMBERS \
  STEPS PEAK; do
  echo "$name=${!name}"
done > "$WORK/settings.txt"

pack() { python3 benchmarks/gpu_results.py "$WORK" "$RESULTS" || echo "packing failed"; }
status=0
stage() {  # stage NAME LIMIT COMMAND…: within LIMIT and what is left of BUDGET, logged, packed
  local name=$1 limit=$2; shift 2
  local left=$((BUDGET - SECONDS)) load started=$SECONDS s=0
  load=$(cut -d' ' -f1 /proc/loadavg)
  echo "$name" >> "$WORK/stages"
  if [ "$left" -lt "$MIN_STAGE" ]; then
    echo "stage $name skipped: $left s left of BUDGET=$BUDGET"
    printf '%s\n' skipped 0 "$limit" "$load" "$*" > "$WORK/$name.stage"
    pack
    return
  fi
  [ "$limit" -le "$left" ] || limit=$left
  echo "== $name, at most $limit s: $*"
  timeout -k 20 "$limit" "$@" 2>&1 | tee "$WORK/$name.log" || s=${PIPESTATUS[0]}
  [ "$s" -eq 0 ] || { echo "stage $name ended with status $s"; status=$s; }
  printf '%s\n' "$s" "$((SECONDS - started))" "$limit" "$load" "$*" > "$WORK/$name.stage"
  pack
}
skipped() {  # skipped NAME WHY: a stage left out by its setting, said in the results
  echo "$1" >> "$WORK/stages"
  echo "$2" | tee "$WORK/$1.log"
  printf '%s\n' skipped 0 0 "$(cut -d' ' -f1 /proc/loadavg)" "$2" > "$WORK/$1.stage"
}
warp=$(python3 -c "import mujoco_warp" 2>/dev/null && echo yes || echo "")

# 1. The Warp envs: they compile the kernels every later stage loads from the cache.
if [ -z "$WORLDS" ]; then
  skipped warp_envs "WORLDS= : no Warp env timings"
elif [ -n "$warp" ]; then
  # shellcheck disable=SC2086  # WORLDS is a list
  stage warp_envs "$WARP_LIMIT" python3 benchmarks/warp_envs.py --device "$DEVICE" \
    --worlds $WORLDS --steps "$WARP_STEPS" --json "$WORK/warp_envs.json"
else
  skipped warp_envs "MuJoCo Warp is not installed (the gpu extra): no Warp env timings"
fi

# 2-3. The populations a user runs, timed from outside (benchmarks/timed_train.py).
read -r -a extra <<< "$EXTRA"  # words, not globs ([16,16])
whole() {  # whole NAME LIMIT SEEDS STEPS TRAIN_AGENT_ARGS…
  local name=$1 limit=$2 seeds=$3 steps=$4; shift 4
  stage "$name" "$limit" python3 benchmarks/timed_train.py --json "$WORK/$name.json" -- \
    --env HalfCheetah-v4 --opt vadam --seeds "$seeds" --workers 1 --device "$DEVICE" \
    --steps "$steps" "$@" --logdir "$WORK/runs/$name" "${extra[@]}"
}
if [ -n "$WHOLE_SEEDS" ]; then
  whole whole_100 "$WHOLE_LIMIT" "$WHOLE_SEEDS" "$WHOLE_STEPS" --eval-every "$WHOLE_STEPS"
else
  skipped whole_100 "WHOLE_SEEDS= : no whole run"
fi
if [ -n "$LARGE" ]; then
  whole whole_1000 "$LARGE_LIMIT" "$LARGE" "$LARGE_STEPS" --set buffer_size=100000 \
    --eval-episodes 2
else
  skipped whole_1000 "LARGE= : no large population"
fi
rm -rf "$WORK/runs"

# 4. The host's work per step as N grows, on this machine's CPU (no device).
if [ -n "$HOST_MEMBERS" ]; then
  # shellcheck disable=SC2086  # HOST_MEMBERS is a list
  stage host_overhead "$HOST_LIMIT" python3 benchmarks/host_overhead.py \
    --members $HOST_MEMBERS --steps "$HOST_STEPS"
else
  skipped host_overhead "HOST_MEMBERS= : no host overhead"
fi

# 5. A population's training step alone, where its envs step (MuJoCo Warp's on the GPU; on
# a CPU the dry run's mujoco.batch), the preset's compiled update, its copies per step.
if [ -n "$DEVICE_MEMBERS" ]; then
  # shellcheck disable=SC2086  # DEVICE_MEMBERS is a list, DEVICE_EAGER a flag or nothing
  stage device_step "$STAGE_LIMIT" python3 benchmarks/device_step.py --device "$DEVICE" \
    --members $DEVICE_MEMBERS --steps "$DEVICE_STEPS" $DEVICE_EVERY $DEVICE_EAGER
fi

# 6. The CUDA cases of the tests parametrized by device (their CPU cases run in CI).
if [ -n "$TESTS" ]; then
  stage pytest "$STAGE_LIMIT" python3 -m pytest -q -rA -n "${TEST_WORKERS:-4}" \
    -p no:cacheprovider tests/test_devices.py tests/test_population.py \
    tests/test_torch_mountain_car.py tests/test_device_rows.py -m cuda -k "$TESTS"
fi

# 7. While the budget lasts: the update replayed from a CUDA graph beside the compiled one,
# the sparse car's step, the in-process population with the update's share of the peak, the
# sparse tasks' device envs.
if [ -n "$GRAPH_MEMBERS" ]; then
  # shellcheck disable=SC2086  # GRAPH_MEMBERS is a list
  stage device_graph "$STAGE_LIMIT" python3 benchmarks/device_step.py --device "$DEVICE" \
    --members $GRAPH_MEMBERS --steps "$DEVICE_STEPS" --cuda-graph
fi
if [ -n "$DEVICE_MEMBERS" ]; then
  # shellcheck disable=SC2086  # DEVICE_MEMBERS is a list, DEVICE_EAGER a flag or nothing
  stage device_step_sparse "$STAGE_LIMIT" python3 benchmarks/device_step.py \
    --device "$DEVICE" --task sparse --members $DEVICE_MEMBERS --steps "$DEVICE_STEPS" \
    $DEVICE_EAGER
fi
if [ -n "$MEMBERS" ]; then
  # shellcheck disable=SC2086  # MEMBERS is a list, PEAK a flag or nothing
  stage population "$STAGE_LIMIT" python3 benchmarks/population.py --device "$DEVICE" \
    --workers 1 --tasks halfcheetah --members $MEMBERS --modes population \
    --steps-halfcheetah "$STEPS" $PEAK --cold --json "$WORK/population.json"
fi
if [ -n "$WORLDS" ]; then
  if [ -n "$warp" ]; then
    # shellcheck disable=SC2086  # WORLDS is a list
    stage warp_envs_cartpole "$STAGE_LIMIT" python3 benchmarks/warp_envs.py \
      --device "$DEVICE" --env SparseCartpoleSwingup-v0 --worlds $WORLDS --steps "$WARP_STEPS" \
      --json "$WORK/warp_envs_cartpole.json"
  fi
  # shellcheck disable=SC2086  # WORLDS is a list
  stage car_envs "$STAGE_LIMIT" python3 benchmarks/warp_envs.py --device "$DEVICE" \
    --env SparseMountainCar-v0 --worlds $WORLDS --steps "$WARP_STEPS" \
    --json "$WORK/car_envs.json"
fi
pack
echo "every figure: $RESULTS ($SECONDS s)"
exit "$status"

#!/usr/bin/env bash
# The GPU check, one short script for a machine with a CUDA device, in stages of at most
# STAGE_LIMIT seconds each (a late stage still reports): first benchmarks/warp_envs.py, the
# MuJoCo Warp env's env-steps/s for WORLDS (100 and 1000) worlds — stepped as tensors, through
# numpy, and its physics alone launched kernel by kernel and as a CUDA graph — whose kernels
# every later stage then loads from the cache; then benchmarks/device_step.py: a population's
# training step alone for DEVICE_MEMBERS (1 100 1000) members, seed-steps/s and host<->device
# transfers per step (the engine's crossings and the CUDA profiler's copies), for HalfCheetah
# and for the sparse car (device_step_sparse.log); then
# benchmarks/population.py: MEMBERS (100)
# members of the 400-300 HalfCheetah-v4 config as one population's whole run (its envs in
# MuJoCo Warp), with the compiled update's share of the GPU's fp32 peak; then the CUDA tests:
# the CUDA cases (marker `cuda`) of the tests parametrized by device, whose CPU cases CI runs
# (single runs eager and compiled, the CLI with --resume, a population's update against the
# CPU's, the Warp env on the GPU against gymnasium's and its CUDA graph against its kernels);
# then LARGE (1000) members, a shorter run; then the sparse tasks' device envs (the cart-pole in
# MuJoCo Warp, the car as torch code). Results go to $OUT (default ./gpu-check): a .log
# per stage, warp_envs.json, population.json, population_large.json. Without MuJoCo Warp (the
# `gpu` extra) its tests skip and its benchmark says so in one line.
#
#   bash benchmarks/gpu_check.sh                 # on the GPU machine, from the repo root
#   DEVICE=cpu STEPS=300 MEMBERS=2 LARGE= WORLDS=2 WARP_STEPS=3 DEVICE_MEMBERS=2 \
#     DEVICE_STEPS=20 bash benchmarks/gpu_check.sh
#                                                # a dry run of the script here
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
# (2026-11-27 on an H200: docs/speed.md, "On a GPU"). TESTS (pytest -k), PEAK= (no update
# timing), MEMBERS/STEPS, LARGE= (no large population) and STAGE_LIMIT size a rerun.
set -euo pipefail
cd "$(dirname "$0")/.."

OUT=${OUT:-gpu-check}
DEVICE=${DEVICE:-cuda}
STEPS=${STEPS:-3000}
MEMBERS=${MEMBERS:-100}
LARGE=${LARGE-1000}  # LARGE= skips it
LARGE_STEPS=${LARGE_STEPS:-500}
WORLDS=${WORLDS:-100 1000}
WARP_STEPS=${WARP_STEPS:-200}
DEVICE_MEMBERS=${DEVICE_MEMBERS:-1 100 1000}
DEVICE_STEPS=${DEVICE_STEPS:-300}
TESTS=${TESTS:-cuda}  # pytest -k within the CUDA tests (-m cuda): a rerun's subset
PEAK=${PEAK:---peak}     # PEAK= skips the update's timing (a rerun that has it)
STAGE_LIMIT=${STAGE_LIMIT:-200}  # seconds each stage may take: a late one still reports
mkdir -p "$OUT"
# Warp's kernels for this device compile once into a cache of this check's own.
WARP_CACHE_PATH=${WARP_CACHE_PATH:-$(mktemp -d)/warp}
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
  torch.cuda.get_device_name() if torch.cuda.is_available() else '')" | tee "$OUT/device.txt"

status=0
stage() {  # stage LOG COMMAND…: COMMAND's output into $OUT/LOG too, its status kept
  local log=$1; shift
  timeout "$STAGE_LIMIT" "$@" > >(tee "$OUT/$log") 2>&1 || {
    local s=$?; echo "stage ended with status $s: $*"; status=$s; }
}

# First the Warp envs: they compile the kernels every later stage loads from the cache.
if python3 -c "import mujoco_warp" 2>/dev/null; then
  # shellcheck disable=SC2086  # WORLDS is a list
  stage warp_envs.log python3 benchmarks/warp_envs.py --device "$DEVICE" --worlds $WORLDS \
    --steps "$WARP_STEPS" --json "$OUT/warp_envs.json"
else
  echo "MuJoCo Warp is not installed (the gpu extra): no Warp env timings" | tee "$OUT/warp_envs.log"
fi

# A population's training step where its envs step (MuJoCo Warp's on the GPU; on a CPU the
# dry run's mujoco.batch), its transfers per step counted.
# shellcheck disable=SC2086  # DEVICE_MEMBERS is a list
stage device_step.log python3 benchmarks/device_step.py --device "$DEVICE" \
  --members $DEVICE_MEMBERS --steps "$DEVICE_STEPS"
# The same for the sparse study's car (torch code on the GPU, numpy on a CPU).
# shellcheck disable=SC2086  # DEVICE_MEMBERS is a list
stage device_step_sparse.log python3 benchmarks/device_step.py --device "$DEVICE" \
  --task sparse --members $DEVICE_MEMBERS --steps "$DEVICE_STEPS"

# A population's whole run: MEMBERS members of the 400-300 HalfCheetah-v4 config, the
# protocol's test episodes included; --peak times the compiled update first, which fills
# TorchInductor's cache with the graphs the run then loads (no warm-up run: --cold).
# shellcheck disable=SC2086  # MEMBERS is a list
stage population.log python3 benchmarks/population.py --device "$DEVICE" --workers 1 --tasks halfcheetah \
  --members $MEMBERS --modes population --steps-halfcheetah "$STEPS" $PEAK --cold \
  --json "$OUT/population.json"

stage pytest.log python3 -m pytest -q -rA -n "${TEST_WORKERS:-4}" -p no:cacheprovider tests/test_devices.py \
  tests/test_population.py tests/test_torch_mountain_car.py -m cuda -k "$TESTS"

if [ -n "$LARGE" ]; then  # the large population, a shorter run
  stage population_large.log python3 benchmarks/population.py --device "$DEVICE" --workers 1 --tasks halfcheetah \
    --members $LARGE --modes population --steps-halfcheetah "$LARGE_STEPS" --peak --cold \
    --set buffer_size=100000 --json "$OUT/population_large.json"
fi

# Last, the sparse tasks' device envs: the cart-pole in MuJoCo Warp (one CUDA graph a
# MuJoCo step, Box2D's rotation limit in torch between) and the car as torch code.
if python3 -c "import mujoco_warp" 2>/dev/null; then
  # shellcheck disable=SC2086  # WORLDS is a list
  stage warp_envs_cartpole.log python3 benchmarks/warp_envs.py --device "$DEVICE" \
    --env SparseCartpoleSwingup-v0 --worlds $WORLDS --steps "$WARP_STEPS"
fi
# shellcheck disable=SC2086  # WORLDS is a list
stage car_envs.log python3 benchmarks/warp_envs.py --device "$DEVICE" --env SparseMountainCar-v0 \
  --worlds $WORLDS --steps "$WARP_STEPS"
exit "$status"

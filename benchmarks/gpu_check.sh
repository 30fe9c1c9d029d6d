#!/usr/bin/env bash
# The GPU check, one short script for a machine with a CUDA device: the CUDA tests (single
# runs eager and compiled, the CLI with --resume, a population's update against the CPU's,
# HalfCheetah's MuJoCo Warp env on the GPU against gymnasium's), then benchmarks/warp_envs.py:
# the MuJoCo Warp env's env-steps/s for WORLDS (100 and 1000) worlds, and benchmarks/
# population.py on the GPU: N in {1, 10, 100} members of the 400-300 HalfCheetah-v4 config as
# populations (their envs in MuJoCo Warp where it is installed), and the compiled update's
# share of the GPU's fp32 peak. Results go to $OUT (default ./gpu-check): pytest.log,
# warp_envs.json, warp_envs.log, population.json, population.log. Without MuJoCo Warp (the
# `gpu` extra) its test skips and its benchmark says so in one line.
#
#   bash benchmarks/gpu_check.sh                 # on the GPU machine, from the repo root
#   DEVICE=cpu STEPS=300 MEMBERS="1 2" WORLDS="2" WARP_STEPS=3 bash benchmarks/gpu_check.sh
#                                                # a dry run of the script here
#
# A GPU image that holds torch but not the project's other dependencies takes them as
# wheels made here (Python 3.12, manylinux x86-64; `bash benchmarks/gpu_wheels.sh .whl`),
# unpacked into a folder put on PYTHONPATH: set WHEELS to that folder of .whl files and the
# script installs them first (no network). On a lent device: carry .whl, then
#   WHEELS=.whl bash benchmarks/gpu_check.sh     # ~2 min of tests, then the timings
# (first run, 2026-11-27 on an H200: docs/speed.md, "On a GPU"). The `gpu` extra's wheels
# (`GPU=1 bash benchmarks/gpu_wheels.sh .whl`) go in the same folder; warp-lang's alone is
# 149 MB, more than a lent machine takes in one call's tree (64 MiB), so there it needs a
# machine that can install it (WHEELS may also be set to a folder already on the machine).
set -euo pipefail
cd "$(dirname "$0")/.."

OUT=${OUT:-gpu-check}
DEVICE=${DEVICE:-cuda}
STEPS=${STEPS:-5000}
MEMBERS=${MEMBERS:-1 10 100}
WORLDS=${WORLDS:-100 1000}
WARP_STEPS=${WARP_STEPS:-200}
mkdir -p "$OUT"
# Warp's kernels for this device compile once into a cache of this check's own.
WARP_CACHE_PATH=${WARP_CACHE_PATH:-$(mktemp -d)/warp}
export WARP_CACHE_PATH

if [ -n "${WHEELS:-}" ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site "$WHEELS"/*.whl
  export PYTHONPATH=/tmp/site:$PWD${PYTHONPATH:+:$PYTHONPATH}
fi
export PYTHONUNBUFFERED=1
python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.cuda.is_available(),
  torch.cuda.get_device_name() if torch.cuda.is_available() else '')" | tee "$OUT/device.txt"

status=0
python3 -m pytest -q -rA -n "${TEST_WORKERS:-4}" -p no:cacheprovider tests/test_cuda.py \
  tests/test_population.py -k "gpu" 2>&1 | tee "$OUT/pytest.log" || status=$?

if python3 -c "import mujoco_warp" 2>/dev/null; then
  # shellcheck disable=SC2086  # WORLDS is a list
  python3 benchmarks/warp_envs.py --device "$DEVICE" --worlds $WORLDS --steps "$WARP_STEPS" \
    --json "$OUT/warp_envs.json" 2>&1 | tee "$OUT/warp_envs.log" || status=$?
else
  echo "MuJoCo Warp is not installed (the gpu extra): no Warp env timings" | tee "$OUT/warp_envs.log"
fi

# --peak times each N's compiled update first, which fills TorchInductor's cache with the
# graphs the whole runs then load: no warm-up run of their own (--cold), half the device time.
# shellcheck disable=SC2086  # MEMBERS is a list
python3 benchmarks/population.py --device "$DEVICE" --workers 1 --tasks halfcheetah \
  --members $MEMBERS --modes population --steps-halfcheetah "$STEPS" --peak --cold \
  --json "$OUT/population.json" 2>&1 | tee "$OUT/population.log" || status=$?
exit "$status"

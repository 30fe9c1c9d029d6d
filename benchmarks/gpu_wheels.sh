#!/usr/bin/env bash
# The wheels benchmarks/gpu_check.sh needs on a GPU machine whose image holds torch, numpy,
# scipy, tensorboard, matplotlib, seaborn, pyyaml, tqdm and rich but not the project's other
# dependencies, and that cannot reach a package registry: run here (with the network), then
# hand the folder over as WHEELS. Python 3.12, manylinux x86-64: what the lent machines run.
# The versions are this project's CI's; pandas < 3 because rliable's arch fails under 3, and
# rliable 1.2.0 is built here from its source release (the registry has no wheel of it).
#
#   bash benchmarks/gpu_wheels.sh .whl      # about 23 MB
#   WHEELS=.whl bash benchmarks/gpu_check.sh        # there
#
# GPU=1 adds the `gpu` extra's (MuJoCo Warp for the MuJoCo tasks' envs on the device):
# mujoco-warp 4.0.0's wheel, and warp-lang 1.19.0 (a 149 MB wheel; etils and absl-py, its other
# needs, are in that image) packed for a machine that takes 64 MiB a call: CUDA only (without
# warp-clang.so, Warp's CPU backend, which Warp loads only where it exists, and without its
# examples and tests), as one xz tar (79 MB) in parts of PART bytes (default 58 MB),
# warp.tar.xz.aa, .ab, …, which gpu_check.sh joins and unpacks. Each part travels in a call
# of its own (gpu_check.sh's header says how).
set -euo pipefail
dest=${1:-.whl}
mkdir -p "$dest"
platforms=()
for tag in manylinux_2_28 manylinux_2_27 manylinux_2_24 manylinux_2_17 manylinux2014 manylinux1; do
  platforms+=(--platform "${tag}_x86_64")
done
python3 -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 \
  --implementation cp "${platforms[@]}" -d "$dest" \
  gymnasium==1.4.0 farama-notifications==0.0.6 mujoco==4.0.0 mujoco-core==4.0.0 glfw==2.11.0 \
  stable-baselines3==2.9.2 arch==7.2.0 pandas==2.3.3 pytz tzdata
python3 -m pip wheel --quiet --no-deps -w "$dest" rliable==1.2.0
if [ -n "${GPU:-}" ]; then
  python3 -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp "${platforms[@]}" -d "$dest" mujoco-warp==4.0.0 warp-lang==1.19.0
  unpacked=$(mktemp -d)
  python3 -m zipfile -e "$dest"/warp_lang-1.19.0-*.whl "$unpacked"
  rm -rf "$unpacked"/warp/bin/warp-clang.so "$unpacked"/warp/examples "$unpacked"/warp/tests
  tar -C "$unpacked" -cf - warp warp_lang-1.19.0.dist-info | xz -9e -T0 \
    | split -b "${PART:-58000000}" -a 2 - "$dest"/warp.tar.xz.
  rm -rf "$unpacked" "$dest"/warp_lang-1.19.0-*.whl
fi
ls "$dest"

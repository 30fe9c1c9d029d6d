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
# mujoco-warp 4.0.0 and warp-lang 1.19.0 (149 MB; etils and absl-py, its other needs, are in
# that image).
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
fi
ls "$dest"

#!/usr/bin/env bash
# Is a population's member the run of its seed over a whole run? (README.md beside this
# script.) Vadam on Pendulum-v1 with 64-64 networks, 10 seeds, 30 k steps, trained twice:
# as populations (the default of a grid) and as one process per seed (--no-population);
# then one comparison of the two as an ablation of one task.
#
#   bash studies/population-fidelity/reproduce.sh                 # both grids, then the report
#   REPORT_ONLY=1 bash studies/population-fidelity/reproduce.sh   # the report from the committed CSVs
#
# Resumable: a finished run is skipped. Runs write into runs/<mode>/Pendulum-v1/vadam/seed<k>/;
# their eval.csv, explore.csv and config.yaml are committed.
set -euo pipefail
cd "$(dirname "$0")"

STEPS=${STEPS:-30000}
SEEDS=${SEEDS:-10}
WORKERS=${WORKERS:-2}
if [ -z "${REPORT_ONLY:-}" ]; then
  grid=(train_agent --env Pendulum-v1 --opt vadam --seeds "$SEEDS" --steps "$STEPS"
        --workers "$WORKERS" --set "hidden_sizes=[64,64]" --set eval_every=3000
        --set eval_episodes=10)
  "${grid[@]}" --logdir runs/population
  "${grid[@]}" --logdir runs/single --no-population
fi

compare_runs runs/population/Pendulum-v1 runs/single/Pendulum-v1 --labels population,single \
  --at 3000,15000,30000 --out .

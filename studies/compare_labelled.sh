# Sourced by the studies' scripts (bash): compare_runs over run directories of one env told
# apart by a label after each strategy, absent directories skipped, at 50 k and 100 k steps.
#   compare_labelled OUT STRATEGIES DIR LABEL [DIR LABEL ...]
compare_labelled() {  # $1: output directory, $2: strategies, then pairs of run directory and
  local out=$1 strategies=$2 dirs=() labels=()  # label; absent directories are skipped
  shift 2
  while [ $# -gt 0 ]; do
    if [ -d "$1" ]; then dirs+=("$1") labels+=("$2"); fi
    shift 2
  done
  if [ ${#dirs[@]} -gt 1 ]; then
    compare_runs "${dirs[@]}" --labels "$(IFS=,; echo "${labels[*]}")" \
      --strategies "$strategies" --at 50000,100000 --out "$out"
  fi
}

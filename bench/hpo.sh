#!/bin/sh
# Our samplers and pruners beside Optuna 3.1's, in one run on this machine (../shared/bench/hpo):
#   1. ../shared/bench/hpo/optuna_reference.py: Optuna's TPE, multivariate TPE, random, CMA-ES and a GP-EI
#      reference (scikit-learn) on branin, hartmann6, levy10, rosenbrock10 and mixed, TRIALS x SEEDS;
#   2. bench/hpo_bench (build/bench/hpo_bench): ours on the same functions and counts;
#   3. with --lcbench: both sides' pruners on the LCBench surrogate curves at equal epoch budget.
# Prints a table per function: median regret at 100 trials and ms per suggestion of each sampler, and the
# verdicts of the issue's targets (our best <= Optuna TPE on all five, <= the best Optuna sampler on >= 3;
# TPE <= 1 ms per suggestion at 100 trials). JSON of both sides goes to OUT (default /tmp/gpugeek-hpo-bench),
# and a chart per function of the median best-so-far regret of every sampler to OUT/charts/FUNCTION.svg.
#
# Usage: bench/hpo.sh [--trials N] [--seeds N] [--lcbench] [--out DIR]
# Needs python3-optuna, python3-cmaes, python3-scipy, python3-sklearn (scripts/install-deps.sh). The full
# run (100 x 10, with LCBench) takes about 30 minutes on 2 cores, most of it Optuna's GP-EI reference.
set -eu
trials=100
seeds=10
lcbench=0
out=/tmp/gpugeek-hpo-bench
while [ $# -gt 0 ]; do
  case "$1" in
    --trials) trials=$2; shift 2 ;;
    --seeds) seeds=$2; shift 2 ;;
    --lcbench) lcbench=1; shift ;;
    --out) out=$2; shift 2 ;;
    *) echo "usage: bench/hpo.sh [--trials N] [--seeds N] [--lcbench] [--out DIR]" >&2; exit 2 ;;
  esac
done
cd "$(dirname "$0")/.."
shared=../shared/bench/hpo
bench=build/bench/hpo_bench
[ -x "$bench" ] || { echo "$bench is not built; run: ninja -C build hpo_bench" >&2; exit 2; }
[ -f "$shared/optuna_reference.py" ] || { echo "$shared/optuna_reference.py not found" >&2; exit 2; }
mkdir -p "$out"
curves=$shared/data/lcbench_surrogate_curves.csv.gz

echo "== Optuna $(/usr/bin/python3 -c 'import optuna; print(optuna.__version__)'): $trials trials x $seeds seeds" >&2
/usr/bin/python3 "$shared/optuna_reference.py" --trials "$trials" --seeds "$seeds" --no-pruners >"$out/optuna.json"
echo "== gpugeek" >&2
"$bench" --trials "$trials" --seeds "$seeds" --svg "$out/charts" --reference "$out/optuna.json" >"$out/ours.json"
if [ "$lcbench" -eq 1 ]; then
  echo "== LCBench early stopping (Optuna, then gpugeek)" >&2
  /usr/bin/python3 "$shared/optuna_reference.py" --functions '' --no-pruners --seeds 5 --lcbench "$curves" \
    >"$out/optuna_lcbench.json"
  "$bench" --functions '' --seeds 5 --lcbench "$curves" >"$out/ours_lcbench.json"
fi
/usr/bin/python3 bench/hpo_compare.py "$out" "$trials"

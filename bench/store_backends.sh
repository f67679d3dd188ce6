#!/usr/bin/env bash
# Issue "beyond one machine": durable submissions/s on SQLite and on PostgreSQL, and Slurm's own sbatch
# rate beside gpugeek's pinned submission (and its submit -> RUNNING latency) on the same cluster, in one run.
#   bash bench/store_backends.sh [BUILD_DIR]     (default build; needs root for the throw-away servers)
# PostgreSQL 15 runs at its durable defaults (fsync, synchronous_commit on), from ../shared/infra/postgres-up.sh;
# Slurm 22.05 (2 nodes x 4 fake A100, slurmrestd) from ../shared/infra/slurm-up.sh. Both stop at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
infra="${GPUGEEK_SHARED_DIR:-$(pwd)/../shared}/infra"
ninja -C "$build" store_bench slurm_bench >/dev/null
state=$(mktemp -d /tmp/gpugeek-bench.XXXXXX)
chmod 755 "$state"
cleanup() {
  bash "$infra/slurm-down.sh" "$state/slurm" --purge >/dev/null 2>&1 || true
  bash "$infra/postgres-down.sh" "$state/pg" --purge >/dev/null 2>&1 || true
  rm -rf "$state"
}
trap cleanup EXIT
url=$(PG_DB=gpugeek_bench bash "$infra/postgres-up.sh" "$state/pg" 2>/dev/null | sed -n 's/^export DATABASE_URL=//p')
echo "== durable submissions ($(nproc) cores; PostgreSQL at $url)"
GPUGEEK_BENCH_POSTGRES_URL="$url" "$build/bench/store_bench" --benchmark_filter=DurableSubmit \
  --benchmark_counters_tabular=true
echo "== Slurm: sbatch's own rate vs gpugeek's pinned submission"
(
  eval "$(SLURM_NODE_PREFIX=b bash "$infra/slurm-up.sh" "$state/slurm" 2>/dev/null)"
  "$build/bench/slurm_bench" --jobs 200
)

#!/usr/bin/env bash
# Autoscaling of a served model end to end (bench/serve_autoscale.py says what is measured): starts `gpugeek up`
# in a fresh data folder (emulated 8 x A100 when the host has no GPU), deploys bench/serve_autoscale.yaml (the
# quickstart's examples/gpt-serve.yaml on serve.py's seeded weights: no registry needed), drives it through the
# gateway, and stops everything.
#
#   bash bench/serve_autoscale.sh [BUILD_DIR] [CYCLES]     # CYCLES cold starts (default 20; about 20 s each)
set -euo pipefail
build=${1:-build}
cycles=${2:-20}
port=${GPUGEEK_BENCH_PORT:-18570}
cd "$(dirname "$0")/.."
data=$(mktemp -d -t gpugeek-autoscale.XXXXXX)
chmod 755 "$data"  # workloads run as their own users: they must reach their folders under it
log="$data/up.log"
"$build/gpugeek" up --data-dir "$data" --listen "127.0.0.1:$port" --agent-listen 127.0.0.1:0 \
  --agent-metrics-listen 127.0.0.1:0 --gateway-listen "127.0.0.1:$((port + 10))" >"$log" 2>&1 &
up_pid=$!
trap 'kill -TERM "$up_pid" 2>/dev/null; wait "$up_pid" 2>/dev/null || true; [ -n "${KEEP:-}" ] || rm -rf "$data"' EXIT
url="https://127.0.0.1:$port"
for _ in $(seq 150); do
  if "$build/gpugeek" nodes --server "$url" 2>/dev/null | grep -q " ready "; then break; fi
  kill -0 "$up_pid" 2>/dev/null || { cat "$log"; echo "gpugeek up exited" >&2; exit 1; }
  sleep 0.2
done
"$build/gpugeek" serve bench/serve_autoscale.yaml --server "$url" >&2
/usr/bin/python3 bench/serve_autoscale.py --gpugeek "$build/gpugeek" --server "$url" \
  --gateway "https://127.0.0.1:$((port + 10))" --cacert "$data/server/tls/ca.crt" --cycles "$cycles"

#!/usr/bin/env bash
# The GPT tuning example end to end (docs/hpo.md): starts a pool of its own (`gpugeek up` in a scratch
# folder: a server and an agent with an emulated 8-GPU A100 node), runs examples/gpt-tune.yaml (16 real
# training runs, 4 at once, pruned by ASHA) to the end with a progress line, then prints the trials, the
# best configuration and the parameter importance, writes every trial as CSV and the best-so-far charts
# (vs trials and vs GPU-hours) into OUT (default docs/figures), and stops the pool.
#   examples/gpt-tune.sh [OUT]          (needs build/gpugeek: scripts/build.sh gpugeek)
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-docs/figures}
gpugeek=$PWD/build/gpugeek
[ -x "$gpugeek" ] || { echo "build/gpugeek is missing: run scripts/build.sh gpugeek" >&2; exit 2; }
# World-traversable: trials run as the tenant's unprivileged user and reach their working folders by path.
dir=$(mktemp -d -t gpugeek-tune.XXXXXX)
chmod 755 "$dir"
port=${GPUGEEK_PORT:-8570}
agent_port=${GPUGEEK_AGENT_PORT:-8572}
# The CLI profile `up` saves goes into the scratch folder, not over the user's own.
export GPUGEEK_CONFIG="$dir/config.yaml"
"$gpugeek" up --listen "127.0.0.1:$port" --agent-listen "127.0.0.1:$agent_port" --data-dir "$dir" >"$dir/up.log" 2>&1 &
up_pid=$!
trap 'kill -TERM "$up_pid" 2>/dev/null; wait "$up_pid" 2>/dev/null || true; rm -rf "$dir"' EXIT
export GPUGEEK_SERVER="https://127.0.0.1:$port"
export GPUGEEK_CA_FILE="$dir/server/tls/ca.crt"
for _ in $(seq 150); do
  if [ -s "$dir/server/admin.token" ] && GPUGEEK_TOKEN=$(cat "$dir/server/admin.token") \
    "$gpugeek" nodes 2>/dev/null | grep -q " ready "; then break; fi
  kill -0 "$up_pid" 2>/dev/null || { cat "$dir/up.log"; echo "gpugeek up exited" >&2; exit 1; }
  sleep 0.2
done
export GPUGEEK_TOKEN
GPUGEEK_TOKEN=$(cat "$dir/server/admin.token")
start=$(date +%s)
"$gpugeek" hpo run examples/gpt-tune.yaml --wait | tee "$dir/status.txt"
id=$(sed -n 's/^\(x-[0-9]*\) (gpt-tune).*/\1/p' "$dir/status.txt" | head -1)
echo "wall time: $(( $(date +%s) - start )) s"
mkdir -p "$out"
"$gpugeek" hpo export "$id" --out "$out/gpt-tune-trials.csv"
"$gpugeek" hpo status "$id" --svg "$out" >/dev/null
for f in best-vs-trials best-vs-gpu-hours; do mv "$out/$id-$f.svg" "$out/gpt-tune-$f.svg"; done
echo "wrote $out/gpt-tune-trials.csv, $out/gpt-tune-best-vs-trials.svg, $out/gpt-tune-best-vs-gpu-hours.svg"

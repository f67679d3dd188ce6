#!/usr/bin/env bash
# The Slurm cluster the Slurm backend's tests run against (src/backends/slurm/slurm_cluster_test.cc).
#   bash scripts/slurm-test-cluster.sh up STATE_DIR     start it; its environment goes to STATE_DIR/env
#   bash scripts/slurm-test-cluster.sh down STATE_DIR   stop it and delete STATE_DIR
# CTest runs `up` and `down` as the fixture `slurm` (src/backends/slurm/CMakeLists.txt). The cluster is
# ../shared/infra/slurm-up.sh's (Slurm 22.05: munged, slurmctld, 2 slurmd with 4 fake A100 each, slurmrestd
# with JWT, loopback only), with node names g1, g2 and a 1 s credential expiry, its own state in a fresh
# /tmp/gpugeek-slurm.* (slurmrestd runs as nobody: every parent of its config must be world-executable).
# Where it cannot start (not root, no Slurm packages): with CI=true `up` fails, and so do the Slurm tests
# (no environment); otherwise it writes an empty file and exits 0, and the Slurm tests skip.
set -uo pipefail
cd "$(dirname "$0")/.."
action=${1:-}
state=${2:-}
[ -n "$action" ] && [ -n "$state" ] || { echo "usage: $0 up|down STATE_DIR" >&2; exit 2; }
infra="${GPUGEEK_SHARED_DIR:-$(pwd)/../shared}/infra"

case "$action" in
  up)
    mkdir -p "$state"
    : > "$state/env"
    cluster=$(mktemp -d /tmp/gpugeek-slurm.XXXXXX) && chmod 755 "$cluster" && echo "$cluster" > "$state/cluster"
    if out=$(SLURM_NODES=2 SLURM_GPUS_PER_NODE=4 SLURM_GPU_TYPE=a100 SLURM_NODE_PREFIX=g SLURM_CRED_EXPIRE=1 \
             bash "$infra/slurm-up.sh" "$cluster"); then
      printf '%s\n' "$out" > "$state/env"
      echo "slurm-test-cluster: up ($(printf '%s\n' "$out" | sed -n 's/^export SLURMRESTD_URL=//p'))"
      exit 0
    fi
    if [ "${CI:-}" = true ]; then
      echo "slurm-test-cluster: Slurm did not start (CI=true: the Slurm tests fail)" >&2
      exit 1
    fi
    echo "slurm-test-cluster: Slurm did not start; the Slurm tests will skip" >&2
    exit 0
    ;;
  down)
    if [ -s "$state/cluster" ]; then
      cluster=$(cat "$state/cluster")
      case "$cluster" in /tmp/gpugeek-slurm.*) bash "$infra/slurm-down.sh" "$cluster" --purge ;; esac
    fi
    rm -rf "$state"
    exit 0
    ;;
  *)
    echo "usage: $0 up|down STATE_DIR" >&2
    exit 2
    ;;
esac

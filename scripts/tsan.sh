#!/usr/bin/env bash
# ThreadSanitizer run of the concurrent parts: the control plane (controllers, snapshot, lease and log-grant
# tables, group commit, the HTTP listeners of api_test), the store (write batches, the read connection) and
# the HTTP server; the store on SQLite and on PostgreSQL (its connection pool); the leader election's renewer and
# watchdog. The locks are common/mutex.h
# (std::mutex, which TSan sees). scripts/test.sh (CI) runs it last; alone (about 2.5 min on 2 cores from scratch):
#   bash scripts/tsan.sh [BUILD_DIR]      (default build-tsan)
set -euo pipefail
cd "$(dirname "$0")/.."
dir="${1:-build-tsan}"
CC=clang CXX=clang++ cmake -S . -B "$dir" -G Ninja -DGPUGEEK_BENCH=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS="-fsanitize=thread" -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=thread" >/dev/null
ninja -C "$dir" -j"$(nproc)" controlplane_test store_test http_test leader_election_test
export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1"
# The store suite runs on SQLite and on a real PostgreSQL (the connection pool, write batches on a held
# connection), on the server CTest's fixture `postgres` starts in the other lanes.
pg_state="$(cd "$dir" && pwd)/store_test_postgres"
bash scripts/postgres-test-server.sh up "$pg_state"
trap 'bash scripts/postgres-test-server.sh down "$pg_state"' EXIT
GPUGEEK_TEST_POSTGRES_URL_FILE="$pg_state/url" "$dir/src/store/store_test"
GPUGEEK_TEST_POSTGRES_URL_FILE="$pg_state/url" "$dir/src/controlplane/leader_election_test"
"$dir/src/http/http_test"
"$dir/src/controlplane/controlplane_test"
echo "tsan: no data race reported"

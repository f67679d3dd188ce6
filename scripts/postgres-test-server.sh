#!/usr/bin/env bash
# The PostgreSQL server the store tests run their "postgres" instances against (src/store/store_test.cc).
#   bash scripts/postgres-test-server.sh up STATE_DIR     start it; its URL goes to STATE_DIR/url
#   bash scripts/postgres-test-server.sh down STATE_DIR   stop it and delete STATE_DIR
# CTest runs `up` and `down` as the fixture `postgres` (src/store/CMakeLists.txt); scripts/tsan.sh runs them
# around its store_test run. The server is ../shared/infra/postgres-up.sh's (PostgreSQL 15, loopback only,
# PG_FAST=1: no fsync, throw-away data), on the first free port from 15432; each test makes and drops a
# schema of its own, so one server serves every test at once.
# Where it cannot start (not root, no postgresql-15 package): with CI=true `up` fails, and so do the
# postgres tests (no URL); otherwise it writes an empty URL and exits 0, and the postgres tests skip.
set -uo pipefail
cd "$(dirname "$0")/.."
action=${1:-}
state=${2:-}
[ -n "$action" ] && [ -n "$state" ] || { echo "usage: $0 up|down STATE_DIR" >&2; exit 2; }
infra="${GPUGEEK_SHARED_DIR:-$(pwd)/../shared}/infra"

case "$action" in
  up)
    mkdir -p "$state"
    : > "$state/url"
    if out=$(PG_FAST=1 PG_DB=gpugeek_test bash "$infra/postgres-up.sh" "$state/server"); then
      url=$(printf '%s\n' "$out" | sed -n 's/^export DATABASE_URL=//p')
      printf '%s\n' "$url" > "$state/url"
      echo "postgres-test-server: $url"
      exit 0
    fi
    if [ "${CI:-}" = true ]; then
      echo "postgres-test-server: PostgreSQL did not start (CI=true: the postgres store tests fail)" >&2
      exit 1
    fi
    echo "postgres-test-server: PostgreSQL did not start; the postgres store tests will skip" >&2
    exit 0
    ;;
  down)
    [ -d "$state/server" ] && bash "$infra/postgres-down.sh" "$state/server" --purge
    rm -rf "$state"
    exit 0
    ;;
  *)
    echo "usage: $0 up|down STATE_DIR" >&2
    exit 2
    ;;
esac

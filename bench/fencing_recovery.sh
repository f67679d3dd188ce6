#!/bin/sh
# Recovery from a node failure with real processes: repeats the SIGKILL case of
# tests/integration/fencing_test.cc (a server and three agents with 2 emulated A100s each; the agent
# running a probe job is SIGKILLed, the job runs again elsewhere, the killed agent comes back as the
# spare) KILLS times, checks the fencing invariants over every run, prints p50/p99 of
# kill -> RUNNING elsewhere and of kill -> member stopped, and writes one CSV row per kill.
#
# Usage: bench/fencing_recovery.sh [BUILD_DIR] [KILLS] [CSV]
#   BUILD_DIR  a configured build tree (default: build); fencing_test and gpugeek are built in it
#   KILLS      number of kills (default: 20; about 8 s each)
#   CSV        output (default: fencing_recovery.csv): kill,victim,next_node,kill_to_running_s,
#              kill_to_member_stopped_s,kill_to_new_member_started_s
set -eu
build=${1:-build}
kills=${2:-20}
csv=${3:-fencing_recovery.csv}
ninja -C "$build" fencing_test gpugeek gpugeek-shim >/dev/null
GPUGEEK_FENCING_KILLS="$kills" GPUGEEK_FENCING_CSV="$csv" \
  "$build/tests/integration/fencing_test" --gtest_filter=FencingWithRealAgents.KilledAgentsJobRunsElsewhereAndRecoveryIsMeasured
echo "per-kill figures: $csv"

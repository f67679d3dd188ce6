#!/bin/sh
# Chaos soak with real processes: tests/integration/chaos_test.cc (a server and 4 agents with 8 emulated
# A100s each, 12 checkpointing jobs of which 4 are 2-node gangs; agents SIGKILLed and SIGSTOPped at seeded
# random moments, the server SIGKILLed once) with EVENTS faults. Checks that every job completes from its
# checkpoints, that fencing held, and prints recovery (agent SIGKILL -> job RUNNING again) p50 / p99 beside
# the anchors' defaults. CI runs the same test with 20 faults.
#
# Usage: bench/chaos.sh [BUILD_DIR] [EVENTS] [SEED]
#   BUILD_DIR  a configured build tree (default: build); chaos_test and gpugeek are built in it
#   EVENTS     number of faults (default: 60; about 2 s apart)
#   SEED       the fault schedule's seed (default: the time; printed, so a run can be repeated)
set -eu
build=${1:-build}
events=${2:-60}
ninja -C "$build" chaos_test gpugeek gpugeek-shim >/dev/null
GPUGEEK_CHAOS_EVENTS="$events" GPUGEEK_CHAOS_SEED="${3:-$(date +%s)}" "$build/tests/integration/chaos_test"

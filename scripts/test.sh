#!/usr/bin/env bash
# Runs the whole test suite, as CI does:
#   1. install dependencies (Debian 12 packages; no-op when present);
#   2. formatting check (clang-format, .clang-format); the Prometheus configuration, alert rules and their
#      unit tests (promtool), and the Grafana dashboards' JSON;
#   3. gcc build (-O2) with warnings as errors of the binaries, the benchmarks and the tests that run
#      PyTorch, the soak and the CPU-heavy ones (labels python, soak, heavy; target optimised_tests); the
#      OpenAPI document (`gpugeek openapi`) linted by Redocly CLI's recommended rules (tools/openapi,
#      pinned; an error fails the run); those tests run;
#   4. clang build (-O0) with AddressSanitizer + UndefinedBehaviorSanitizer and libFuzzer: every other
#      unit and integration test, then each fuzz target over its seed corpus and 5 s of mutations;
#   5. clang build with ThreadSanitizer of the store, HTTP and control-plane tests, run (scripts/tsan.sh).
# Every test runs once. Usage: scripts/test.sh [--quick]   (--quick: steps 1-3, with every test built and
# run in step 3)
set -euo pipefail
cd "$(dirname "$0")/.."
quick=0
[ "${1:-}" = "--quick" ] && quick=1
jobs=$(nproc 2>/dev/null || echo 2)
# A test without a TIMEOUT of its own that runs this long has hung: it fails with its output instead of
# holding the run for CTest's default 1500 s.
test_timeout=600
# In CI (a throwaway clone) each lane's object files go once its tests have run: the three builds
# together would otherwise need several GB of disk. Locally they stay, so a rerun is incremental.
drop_objects() {
  if [ "${CI:-}" = true ]; then
    find "$1" \( -name '*.o' -o -name '*.pch' -o -name '*.gch' \) -delete
    echo "(CI: object files of $1 removed; $(du -sh "$1" | cut -f1) left; $(df -h --output=avail . | tail -1) free)"
  fi
}

scripts/install-deps.sh

echo "== format check"
files=$(git ls-files '*.h' '*.cc' '*.c' 2>/dev/null || find src bench tests -name '*.h' -o -name '*.cc' -o -name '*.c')
if [ -n "$files" ]; then
  # shellcheck disable=SC2086
  clang-format --dry-run --Werror $files
fi

echo "== monitoring configuration (promtool)"
# The config reads its API token from gpugeek.token beside it (made by the operator): check a copy with one.
promcheck=$(mktemp -d)
cp deploy/prometheus/prometheus.yml deploy/prometheus/alerts.yml "$promcheck/"
echo "ggk_0000000000000000_$(printf 'x%.0s' $(seq 43))" >"$promcheck/gpugeek.token"
promtool check config "$promcheck/prometheus.yml"
rm -rf "$promcheck"
promtool check rules deploy/prometheus/alerts.yml
promtool test rules deploy/prometheus/alerts_test.yml
for f in deploy/grafana/dashboards/*.json; do
  python3 -m json.tool "$f" >/dev/null || { echo "$f is not valid JSON" >&2; exit 1; }
done

echo "== build (gcc, -Werror)"
cmake -S . -B build -G Ninja -DGPUGEEK_WERROR=ON >/dev/null
if [ "$quick" -eq 1 ]; then
  ninja -C build -j"$jobs"
else
  ninja -C build -j"$jobs" optimised_tests
fi
echo "== OpenAPI lint (Redocly)"
# npm ci installs exactly the lock file's packages; its cache under build/ lets a rerun work offline.
npm ci --prefix tools/openapi --cache "$PWD/build/npm-cache" --prefer-offline --ignore-scripts --no-audit \
  --no-fund --loglevel=error
build/gpugeek openapi >build/openapi.json
tools/openapi/node_modules/.bin/redocly lint --config tools/openapi/redocly.yaml --max-problems 1000 build/openapi.json
if [ "$quick" -eq 1 ]; then
  echo "== tests"
  ctest --test-dir build --output-on-failure -j"$jobs" --timeout "$test_timeout" -LE fuzz
else
  # Each test runs once: here the Python ones (PyTorch training through the optimised binary; no C++ of
  # ours to sanitize), the soak (chaos: minutes of wall time) and the CPU-heavy ones (a watermark embedded
  # in 2^21 weights takes 230 s unoptimised under ASan); every other one under ASan + UBSan below.
  echo "== tests: Python, soak and CPU-heavy"
  ctest --test-dir build --output-on-failure -j"$jobs" --timeout "$test_timeout" -L "python|soak|heavy"
fi
drop_objects build

if [ "$quick" -eq 0 ]; then
  echo "== build (clang, ASan + UBSan, libFuzzer)"
  # -O0 (with assertions on, as a Debug build): the sanitizers' checks do not depend on the optimiser, and
  # a file compiles in half the time (src/api/job_spec.cc with ASan + UBSan + coverage: 17 s at -O1, 8 s at
  # -O0); the gcc lane above keeps the optimised build and its warnings.
  CC=clang CXX=clang++ cmake -S . -B build-asan -G Ninja -DGPUGEEK_WERROR=ON -DGPUGEEK_SANITIZE=ON \
    -DGPUGEEK_FUZZ=ON -DGPUGEEK_FUZZ_SECONDS=5 -DGPUGEEK_BENCH=OFF -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_FLAGS_DEBUG="-O0 -g1" \
    -DCMAKE_CXX_FLAGS_DEBUG="-O0 -g1" >/dev/null
  ninja -C build-asan -j"$jobs"
  echo "== tests under ASan + UBSan (all but the Python, soak and CPU-heavy ones), then fuzz targets"
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest --test-dir build-asan --output-on-failure -j"$jobs" --timeout "$test_timeout" -LE "python|soak|heavy"
  drop_objects build-asan
  echo "== ThreadSanitizer: store, http and control-plane tests"
  bash scripts/tsan.sh build-tsan
fi

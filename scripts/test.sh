#!/usr/bin/env bash
# Runs the whole test suite, as CI does:
#   1. install dependencies (Debian 12 packages; no-op when present);
#   2. formatting check (clang-format, .clang-format); the Prometheus configuration, alert rules and their
#      unit tests (promtool), and the Grafana dashboards' JSON;
#   3. gcc build with warnings as errors; the OpenAPI document (`gpugeek openapi`) linted by Redocly CLI's
#      recommended rules (tools/openapi, pinned; an error fails the run); every unit and integration
#      test (ctest);
#   4. clang build with AddressSanitizer + UndefinedBehaviorSanitizer and libFuzzer: every test again,
#      then each fuzz target briefly over its seed corpus;
#   5. clang build with ThreadSanitizer of the store, HTTP and control-plane tests, run (scripts/tsan.sh).
# Usage: scripts/test.sh [--quick]   (--quick skips steps 4 and 5)
set -euo pipefail
cd "$(dirname "$0")/.."
quick=0
[ "${1:-}" = "--quick" ] && quick=1
jobs=$(nproc 2>/dev/null || echo 2)
# In CI (a throwaway clone) each lane's object files go once its tests have run: the three builds
# together would otherwise need several GB of disk. Locally they stay, so a rerun is incremental.
drop_objects() {
  if [ "${CI:-}" = true ]; then
    find "$1" -name '*.o' -delete
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
ninja -C build -j"$jobs"
echo "== OpenAPI lint (Redocly)"
# npm ci installs exactly the lock file's packages; its cache under build/ lets a rerun work offline.
npm ci --prefix tools/openapi --cache "$PWD/build/npm-cache" --prefer-offline --ignore-scripts --no-audit \
  --no-fund --loglevel=error
build/gpugeek openapi >build/openapi.json
tools/openapi/node_modules/.bin/redocly lint --config tools/openapi/redocly.yaml --max-problems 1000 build/openapi.json
echo "== tests"
ctest --test-dir build --output-on-failure -j"$jobs" -LE fuzz
drop_objects build

if [ "$quick" -eq 0 ]; then
  echo "== build (clang, ASan + UBSan, libFuzzer)"
  CC=clang CXX=clang++ cmake -S . -B build-asan -G Ninja -DGPUGEEK_WERROR=ON -DGPUGEEK_SANITIZE=ON \
    -DGPUGEEK_FUZZ=ON -DGPUGEEK_BENCH=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
  ninja -C build-asan -j"$jobs"
  # The Python tests (examples/gpt: PyTorch training) and the soak (chaos) test ran in the first lane; the
  # former hold no C++ of ours to sanitize, the latter is minutes of wall time.
  echo "== tests under ASan + UBSan (but the Python and soak ones), then fuzz targets"
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest --test-dir build-asan --output-on-failure -j"$jobs" -LE "python|soak"
  drop_objects build-asan
  echo "== ThreadSanitizer: store, http and control-plane tests"
  bash scripts/tsan.sh build-tsan
fi

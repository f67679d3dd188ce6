#!/bin/sh
# Near-duplicate detection on a real corpus every Debian machine has: the copyright files of the installed
# packages (/usr/share/doc/*/copyright) and the common licences (/usr/share/common-licenses), thousands of
# documents with many exact and near copies. Runs `gpugeek data dedup --evaluate` (src/data): the finder's
# precision, recall and F1 against brute-force exact Jaccard, and the S-curve against 1-(1-J^r)^b, once
# and then pooled over SEEDS MinHash seeds (a corpus's near copies come in families whose pairs become
# candidates together, so one seed's curve is lumpy; the pooled one shows the hashing is unbiased); then
# throughput in MB/s (10^6 bytes per second) of the finder on every core and on one thread beside
# coreutils' sha256sum over the same files, warm in the page cache, with the ratios to sha256sum.
#
# Usage: [SEEDS=8] bench/dedup.sh [OUT] [GPUGEEK] [-- DEDUP_FLAGS...]
#   OUT      folder for the report (duplicates.csv, s_curve.csv, s_curve.svg, report.txt); default build/dedup
#   GPUGEEK  the gpugeek binary (default build/gpugeek)
#   DEDUP_FLAGS  passed on (default: word 5-grams, threshold 0.8, bands and rows chosen for it: 16 x 6;
#                datatrove's are --bands 14 --rows 8)
set -eu
out=${1:-build/dedup}
gpugeek=${2:-build/gpugeek}
[ $# -ge 2 ] && shift 2 || shift $#
[ "${1:-}" = "--" ] && shift
[ -x "$gpugeek" ] || { echo "$gpugeek is not built; run: ninja -C build gpugeek" >&2; exit 2; }
mkdir -p "$out"

list="$out/corpus.txt"
{ ls /usr/share/doc/*/copyright 2>/dev/null; find /usr/share/common-licenses -type f 2>/dev/null; } \
  | LC_ALL=C sort >"$list"
docs=$(wc -l <"$list")
[ "$docs" -gt 1 ] || { echo "no corpus: /usr/share/doc/*/copyright and /usr/share/common-licenses are empty" >&2; exit 2; }
bytes=$(xargs cat <"$list" | wc -c)
xargs cat <"$list" >/dev/null  # warm the page cache for every run

now() { date +%s.%N; }
mbps() { awk -v b="$bytes" -v t="$1" 'BEGIN { printf "%.1f", b / t / 1e6 }'; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { print b - a }'; }

# The files are passed by name: xargs would split a long list over several runs.
set -- $(cat "$list") "$@"
{
  echo "corpus: $docs documents, $bytes bytes; $(nproc) cores; $(sha256sum --version | head -1)"
  echo
  "$gpugeek" data dedup --evaluate --out "$out" "$@"
} | tee "$out/report.txt"

seeds=${SEEDS:-8}
s=1
while [ "$s" -le "$seeds" ]; do
  "$gpugeek" data dedup --evaluate --json --seed "$s" "$@" >"$out/seed$s.json"
  s=$((s + 1))
done
python3 - "$out" "$seeds" <<'PY' | tee -a "$out/report.txt"
import json, sys
out, seeds = sys.argv[1], int(sys.argv[2])
pooled = {}
for s in range(1, seeds + 1):
    for b in json.load(open(f"{out}/seed{s}.json"))["evaluation"]["s_curve"]:
        p = pooled.setdefault((b["lo"], b["hi"]), [0, 0, 0.0])
        p[0] += b["pairs"]; p[1] += b["candidates"]; p[2] += b["theoretical"] * b["pairs"]
print(f"\nS-curve pooled over seeds 1..{seeds}: pairs that became LSH candidates")
print(f"{'jaccard':10} {'pairs':>7} {'measured':>9} {'1-(1-J^r)^b':>12}")
for (lo, hi), (pairs, cand, theory) in sorted(pooled.items()):
    if pairs and theory / pairs >= 1e-4:
        print(f"{lo:.2f}-{hi:.2f} {pairs // seeds:7d} {cand / pairs:9.4f} {theory / pairs:12.4f}")
PY

t=$(now); "$gpugeek" data dedup "$@" >/dev/null; all_s=$(since "$t")
t=$(now); "$gpugeek" data dedup --threads 1 "$@" >/dev/null; one_s=$(since "$t")
t=$(now); xargs sha256sum <"$list" >/dev/null; sum_s=$(since "$t")
{
  echo
  echo "throughput (whole command: reading, sketching, finding), MB/s:"
  printf '  %-34s %8s  %s\n' "gpugeek data dedup, $(nproc) threads" "$(mbps "$all_s")" \
    "$(awk -v a="$sum_s" -v b="$all_s" 'BEGIN { printf "%.2fx sha256sum", a / b }')"
  printf '  %-34s %8s  %s\n' "gpugeek data dedup, 1 thread" "$(mbps "$one_s")" \
    "$(awk -v a="$sum_s" -v b="$one_s" 'BEGIN { printf "%.2fx sha256sum", a / b }')"
  printf '  %-34s %8s\n' "sha256sum" "$(mbps "$sum_s")"
  echo "report: $out/report.txt, $out/duplicates.csv, $out/s_curve.csv, $out/s_curve.svg"
} | tee -a "$out/report.txt"

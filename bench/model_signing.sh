#!/bin/sh
# Throughput of `gpugeek model sign` and `gpugeek model verify` (src/models/signing.h) against coreutils'
# sha256sum over the same files, warm in the page cache, so the figures compare hashing, not the disk.
# Signing hashes several files at once (one thread per core, largest first); sha256sum hashes one after
# another. Prints MB/s (10^6 bytes per second) of each and the ratio ours / sha256sum.
#
# Usage: bench/model_signing.sh [SIZE_MIB] [FILES] [GPUGEEK]
#   SIZE_MIB  total bytes of the fake model, in MiB (default 256; at most 16384), split over FILES files
#   FILES     number of files (default 8, like a sharded checkpoint)
#   GPUGEEK   the gpugeek binary (default: build/gpugeek)
# The files are random bytes in a temporary folder under $TMPDIR (or /tmp), removed on exit.
set -eu
size_mib=${1:-256}
files=${2:-8}
gpugeek=${3:-build/gpugeek}
case "$size_mib$files" in *[!0-9]*) echo "SIZE_MIB and FILES must be whole numbers" >&2; exit 2 ;; esac
if [ "$size_mib" -lt 1 ] || [ "$size_mib" -gt 16384 ] || [ "$files" -lt 1 ] || [ "$files" -gt "$size_mib" ]; then
  echo "SIZE_MIB must be 1..16384 and FILES 1..SIZE_MIB" >&2
  exit 2
fi
[ -x "$gpugeek" ] || { echo "$gpugeek is not built; run: ninja -C build gpugeek" >&2; exit 2; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/gpugeek-signing-bench.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM
free_mib=$(df -Pm "$tmp" | awk 'NR == 2 { print $4 }')
if [ "$free_mib" -lt $((size_mib + 64)) ]; then
  echo "$tmp has $free_mib MiB free; need $size_mib MiB and some room" >&2
  exit 2
fi

model="$tmp/model"
mkdir -p "$model/shards"
per_file=$((size_mib / files))
i=0
while [ "$i" -lt "$files" ]; do
  # The last file takes the remainder, so the total is exactly SIZE_MIB.
  n=$per_file
  [ "$i" -eq $((files - 1)) ] && n=$((size_mib - per_file * (files - 1)))
  head -c $((n * 1048576)) /dev/urandom >"$model/shards/$(printf 'model-%05d.safetensors' "$i")"
  i=$((i + 1))
done
"$gpugeek" model keygen --out "$tmp/key.pem" >/dev/null
cat "$model"/shards/* >/dev/null  # warm the page cache for both sides

now() { date +%s.%N; }
bytes=$((size_mib * 1048576))
mbps() { awk -v b="$bytes" -v t="$1" 'BEGIN { printf "%.0f", b / t / 1e6 }'; }

t0=$(now)
"$gpugeek" model sign "$model" --key "$tmp/key.pem" >/dev/null
t1=$(now)
"$gpugeek" model verify "$model" --key "$tmp/key.pub.pem" >/dev/null
t2=$(now)
(cd "$model" && find . -type f ! -name model.sig | LC_ALL=C sort | xargs sha256sum >/dev/null)
t3=$(now)

sign_s=$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')
verify_s=$(awk -v a="$t1" -v b="$t2" 'BEGIN { print b - a }')
sum_s=$(awk -v a="$t2" -v b="$t3" 'BEGIN { print b - a }')
echo "model: $size_mib MiB in $files files; $(nproc) cores; $(sha256sum --version | head -1)"
printf '%-24s %8.2f s %8s MB/s\n' "gpugeek model sign" "$sign_s" "$(mbps "$sign_s")"
printf '%-24s %8.2f s %8s MB/s\n' "gpugeek model verify" "$verify_s" "$(mbps "$verify_s")"
printf '%-24s %8.2f s %8s MB/s\n' "sha256sum" "$sum_s" "$(mbps "$sum_s")"
awk -v a="$sum_s" -v b="$sign_s" 'BEGIN { printf "sign / sha256sum throughput: %.2fx\n", a / b }'

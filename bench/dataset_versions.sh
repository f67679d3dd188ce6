#!/bin/sh
# Dataset versions (src/data/version_store.h) on a real corpus plus bulk bytes: the copyright files of the
# installed packages and the common licences (thousands of small text files), and BULK_MIB MiB of random
# files of 1-8 MiB (the large files datasets hold, cut into content-defined chunks). Measures:
#   1. hashing throughput of `gpugeek data push` into a fresh store, MB/s (10^6 bytes per second), on every
#      core and on one thread, beside coreutils' sha256sum over the same files (all warm in the page cache),
#      with the ratio to sha256sum; DVC's published rate for the same ratio: 21 GB in "almost 7 minutes"
#      where md5sum took 40 s (iterative/dvc issue 10251), i.e. 0.095x md5sum;
#      and of `gpugeek data shard` (each file one record, 64 MiB shards, each shard's SHA-256) on the same
#      files;
#   2. storage growth: 1% of the files rewritten (random new bytes), pushed again: new bytes stored over
#      the version's bytes, and over the bytes that changed;
#   3. an edit inside a large file (64 KiB inserted in the middle of one bulk file): new bytes stored;
#   5. a cleaning run (`gpugeek data clean`) of the copyright corpus: records kept, removed as exact and
#      near duplicates, anomalies reported;
#   4. checkout of both versions compared byte for byte with the folders pushed (diff -r), fsck, and
#      garbage collection after the second version's branch is deleted (what it removes).
#
# Usage: [BULK_MIB=512] bench/dataset_versions.sh [OUT] [GPUGEEK]
#   OUT      scratch folder and report.txt (default build/dataset_versions); the store and copies live there
#   GPUGEEK  the gpugeek binary (default build/gpugeek)
set -eu
out=${1:-build/dataset_versions}
gpugeek=${2:-build/gpugeek}
bulk_mib=${BULK_MIB:-512}
[ -x "$gpugeek" ] || { echo "$gpugeek is not built; run: ninja -C build gpugeek" >&2; exit 2; }
rm -rf "$out"
mkdir -p "$out/src/docs" "$out/src/bulk"
src="$out/src"
store="$out/store"
report="$out/report.txt"

# The corpus: every copyright file under its package's name, and the licences.
for f in /usr/share/doc/*/copyright; do
  [ -f "$f" ] || continue
  pkg=$(basename "$(dirname "$f")")
  cp "$f" "$src/docs/$pkg.copyright"
done
cp -r /usr/share/common-licenses "$src/licenses"
# Bulk: random files of 1..8 MiB (sizes cycle) until BULK_MIB MiB.
i=0
left=$bulk_mib
while [ "$left" -gt 0 ]; do
  size=$((i % 8 + 1))
  [ "$size" -gt "$left" ] && size=$left
  head -c $((size * 1048576)) /dev/urandom >"$src/bulk/part$(printf %04d $i).bin"
  left=$((left - size))
  i=$((i + 1))
done
files=$(find -L "$src" -type f | wc -l)
bytes=$(find -L "$src" -type f -exec cat {} + | wc -c)
find -L "$src" -type f -exec cat {} + >/dev/null  # warm the page cache

now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { print b - a }'; }
mbps() { awk -v b="$bytes" -v t="$1" 'BEGIN { printf "%.1f", b / t / 1e6 }'; }
field() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])" "$1" "$2"; }

t0=$(now)
find -L "$src" -type f -print0 | xargs -0 sha256sum >/dev/null
sha_s=$(since "$t0")

"$gpugeek" data push -L "$src" --store "$store.1" --dataset corpus --threads 1 --json >"$out/push1.json"
"$gpugeek" data push -L "$src" --store "$store" --dataset corpus -m "v1" --json >"$out/pushN.json"
"$gpugeek" data shard "$src" --out "$out/shards" --json >"$out/shard.json"
shard_s=$(field "$out/shard.json" seconds)
rm -rf "$out/shards"
one_s=$(field "$out/push1.json" seconds)
all_s=$(field "$out/pushN.json" seconds)
rm -rf "$store.1"
cp -r "$src" "$out/v1"

# 2. Rewrite 1% of the files (every 100th in sorted order) with as many random bytes.
find "$src" -type f | LC_ALL=C sort | awk 'NR % 100 == 0' >"$out/changed.txt"
changed_bytes=0
while IFS= read -r f; do
  n=$(wc -c <"$f")
  head -c "$n" /dev/urandom >"$f.new" && mv "$f.new" "$f"
  changed_bytes=$((changed_bytes + n))
done <"$out/changed.txt"
changed_files=$(wc -l <"$out/changed.txt")
"$gpugeek" data branch --store "$store" --dataset corpus v2 >/dev/null
"$gpugeek" data push -L "$src" --store "$store" --dataset corpus --branch v2 -m "1% rewritten" --json >"$out/push2.json"
cp -r "$src" "$out/v2"

# 3. 64 KiB inserted in the middle of one 8 MiB file.
big="$src/bulk/part0007.bin"
if [ -f "$big" ]; then
  half=$(( $(wc -c <"$big") / 2 ))
  { head -c "$half" "$big"; head -c 65536 /dev/urandom; tail -c +$((half + 1)) "$big"; } >"$big.new" && mv "$big.new" "$big"
  "$gpugeek" data push -L "$src" --store "$store" --dataset corpus --branch v2 -m "insert" --json >"$out/push3.json"
fi

# 5. A cleaning run over the copyright corpus alone (each file one text record) as its own dataset.
"$gpugeek" data push -L "$src/docs" --store "$store" --dataset copyright --json >/dev/null
"$gpugeek" data clean --store "$store" --dataset copyright --json >"$out/clean.json"

# 4. Checkouts compared byte for byte, fsck, gc.
"$gpugeek" data checkout --store "$store" --dataset corpus main "$out/co1" >/dev/null
"$gpugeek" data checkout --store "$store" --dataset corpus "$(field "$out/push2.json" commit)" "$out/co2" >/dev/null
diff -r "$out/v1" "$out/co1" && same1=identical || same1=DIFFERENT
diff -r "$out/v2" "$out/co2" && same2=identical || same2=DIFFERENT
"$gpugeek" data fsck --store "$store" --json >"$out/fsck.json"
"$gpugeek" data branch --store "$store" --dataset corpus --delete v2 >/dev/null
"$gpugeek" data gc --store "$store" --json >"$out/gc.json"
"$gpugeek" data fsck --store "$store" --json >"$out/fsck2.json"

python3 - "$out" "$bytes" "$files" "$sha_s" "$one_s" "$all_s" "$shard_s" "$changed_files" "$changed_bytes" "$same1" "$same2" <<'PY' | tee "$report"
import json, os, sys
out, nbytes, files, sha_s, one_s, all_s, shard_s, cf, cb, same1, same2 = sys.argv[1:]
nbytes, files, cf, cb = int(nbytes), int(files), int(cf), int(cb)
sha_s, one_s, all_s, shard_s = float(sha_s), float(one_s), float(all_s), float(shard_s)
j = lambda name: json.load(open(os.path.join(out, name)))
mb = lambda s: nbytes / s / 1e6
print(f"corpus: {files} files, {nbytes} bytes ({nbytes / 2**20:.0f} MiB); {os.cpu_count()} cores")
print()
print("hashing (push into an empty store; files warm in the page cache)")
print(f"{'':28}{'seconds':>9}{'MB/s':>9}{'x sha256sum':>13}")
print(f"{'sha256sum (coreutils)':28}{sha_s:9.2f}{mb(sha_s):9.1f}{1:13.2f}")
print(f"{'gpugeek data push, 1 thread':28}{one_s:9.2f}{mb(one_s):9.1f}{sha_s / one_s:13.2f}")
print(f"{'gpugeek data push, all cores':28}{all_s:9.2f}{mb(all_s):9.1f}{sha_s / all_s:13.2f}")
print(f"{'gpugeek data shard (64 MiB)':28}{shard_s:9.2f}{mb(shard_s):9.1f}{sha_s / shard_s:13.2f}")
print(f"{'DVC (dvc#10251, published)':28}{'':9}{21e9 / 420 / 1e6:9.1f}{40 / 420:13.3f}   (x md5sum, their machine)")
print()
p2 = j("push2.json")
print(f"1% of files rewritten: {cf} files, {cb} bytes changed of {p2['bytes']}")
print(f"  new bytes stored: {p2['new_bytes']} in {p2['new_objects']} objects = "
      f"{100 * p2['new_bytes'] / p2['bytes']:.3f}% of the version, {p2['new_bytes'] / cb:.4f}x the changed bytes")
if os.path.exists(os.path.join(out, "push3.json")):
    p3 = j("push3.json")
    print(f"64 KiB inserted into an 8 MiB file: {p3['new_bytes']} new bytes in {p3['new_objects']} objects")
print()
print(f"checkout v1 vs pushed folder: {same1}; checkout v2 vs pushed folder: {same2}")
f1, gc, f2 = j("fsck.json"), j("gc.json"), j("fsck2.json")
cl = j("clean.json")
print(f"cleaning the copyright corpus: kept {cl['kept']} of {cl['records']} records; removed "
      f"{cl['removed_by_reason']}; {cl['anomalies']} anomalies reported")
print(f"fsck: {f1['objects']} objects, {f1['bytes']} bytes, ok={f1['ok']}")
print(f"gc after deleting branch v2: removed {gc['removed_objects']} objects ({gc['removed_bytes']} bytes), "
      f"kept {gc['kept_objects']}; fsck after: ok={f2['ok']}, unreferenced={f2['unreferenced_objects']}")
PY

#!/usr/bin/env bash
# build-pytorch-image.sh — builds the local container image localhost/pytorch:bookworm for jobs with
# `image: localhost/pytorch:bookworm` (docs/job-spec.md): Debian 12 (debootstrap, minbase variant) with
# Debian's own PyTorch and NumPy (python3-torch, python3-numpy; CPU builds), imported with `podman import`.
# No registry is involved: the agent runs local images only, and reports the ones `podman images` lists.
#
# Usage (as root):  scripts/build-pytorch-image.sh [--podman-root DIR] [--mirror URL] [--tag NAME:TAG] [--if-missing]
#   --podman-root DIR  the podman storage the agent uses (DIR/storage, DIR/runroot), as with
#                      `gpugeek agent --podman "podman --root DIR/storage --runroot DIR/runroot ..."`;
#                      default: podman's own storage (/var/lib/containers/storage)
#   --mirror URL       Debian mirror for debootstrap (default: the first Debian URI apt uses, else
#                      debootstrap's)
#   --tag NAME:TAG     default localhost/pytorch:bookworm
#   --if-missing       do nothing when the storage already holds NAME:TAG
# The image is labelled org.gpugeek.accelerator=cpu (Debian's PyTorch is a CPU build), so every node may run
# it; an image built for CUDA or ROCm carries org.gpugeek.cuda / org.gpugeek.rocm instead, and only nodes whose
# driver supports that version are offered it (src/agent/image_requirements.h).
# With the host's apt cache holding PyTorch (as on a machine that installed python3-torch from Debian) it
# takes about 2 minutes (measured: 1 min 57 s on 2 cores); from an empty cache it downloads about 300 MB.
# Then check:  podman [--root ...] run --rm localhost/pytorch:bookworm python3 -c 'import torch; print(torch.__version__)'
set -euo pipefail
log() { echo "build-pytorch-image: $*" >&2; }
die() { log "ERROR: $*"; exit 1; }

ROOT=""; MIRROR=""; TAG="localhost/pytorch:bookworm"; IF_MISSING=0
while [ $# -gt 0 ]; do
  case "$1" in
    --podman-root) ROOT=${2:?--podman-root needs a folder}; shift 2 ;;
    --mirror) MIRROR=${2:?--mirror needs a URL}; shift 2 ;;
    --tag) TAG=${2:?--tag needs NAME:TAG}; shift 2 ;;
    --if-missing) IF_MISSING=1; shift ;;
    -h|--help) sed -n '2,22p' "$0"; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
done
[ "$(id -u)" = 0 ] || die "debootstrap and rootful podman need root"
if ! command -v debootstrap >/dev/null; then
  log "installing debootstrap (Debian's package)"
  DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y --no-install-recommends debootstrap \
    >&2 || { DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive \
             apt-get -o DPkg::Lock::Timeout=600 install -y --no-install-recommends debootstrap >&2; } \
    || die "debootstrap is missing and could not be installed: apt-get install debootstrap"
fi
command -v podman >/dev/null || die "podman is missing: apt-get install podman runc"

PODMAN=(podman)
if [ -n "$ROOT" ]; then
  mkdir -p "$ROOT"; ROOT=$(cd "$ROOT" && pwd -P)
  PODMAN=(podman --root "$ROOT/storage" --runroot "$ROOT/runroot" --runtime runc --cgroup-manager=cgroupfs
          --events-backend=file)
fi

if [ "$IF_MISSING" = 1 ] && "${PODMAN[@]}" image exists "$TAG" 2>/dev/null; then
  log "$TAG is already in this storage (--if-missing): nothing to do"; exit 0
fi

# Default mirror: the first Debian URI apt is configured with (as ../shared/infra/container-up.sh does),
# else debootstrap's own.
if [ -z "$MIRROR" ]; then
  MIRROR=$(cat /etc/apt/sources.list.d/*.sources 2>/dev/null | sed -n 's/^URIs: *//p' | tr ' ' '\n' \
           | grep -E '/debian/?$' | head -1 || true)
fi

WORK=$(mktemp -d "${TMPDIR:-/tmp}/pytorch-image.XXXXXX")
cleanup() {
  # The chroot's virtual file systems first, so that rm never walks into /proc or /dev of the host.
  local m
  for m in var/cache/apt/archives proc sys dev/pts dev; do umount "$WORK/rootfs/$m" 2>/dev/null || true; done
  for m in var/cache/apt/archives proc sys dev/pts dev; do
    if mountpoint -q "$WORK/rootfs/$m" 2>/dev/null; then
      log "leaving $WORK in place: $WORK/rootfs/$m is still mounted"; return
    fi
  done
  rm -rf "$WORK"
}
trap cleanup EXIT
R=$WORK/rootfs

# The host's apt cache (where this machine's own python3-torch came from) serves every package it holds, so
# on a machine that installed PyTorch from Debian little or nothing is downloaded.
CACHE=/var/cache/apt/archives
CACHE_ARGS=()
[ -d "$CACHE" ] && [ -w "$CACHE" ] && CACHE_ARGS=(--cache-dir="$CACHE")
log "debootstrap --variant=minbase bookworm into $R (a few minutes)"
debootstrap "${CACHE_ARGS[@]}" --variant=minbase bookworm "$R" ${MIRROR:+"$MIRROR"} > "$WORK/debootstrap.log" 2>&1 \
  || { tail -20 "$WORK/debootstrap.log" >&2; die "debootstrap failed (log above)"; }

log "apt-get install python3-torch python3-numpy inside the chroot (about 1 GB)"
mount -t proc proc "$R/proc"
mount --bind /sys "$R/sys"
mount --bind /dev "$R/dev"
mount --bind /dev/pts "$R/dev/pts"
if [ ${#CACHE_ARGS[@]} -gt 0 ]; then mount --bind "$CACHE" "$R/var/cache/apt/archives"; fi
cp /etc/resolv.conf "$R/etc/resolv.conf"
# No service may start inside the chroot.
printf '#!/bin/sh\nexit 101\n' > "$R/usr/sbin/policy-rc.d"; chmod 755 "$R/usr/sbin/policy-rc.d"
chroot "$R" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive LANG=C.UTF-8 \
  sh -c 'apt-get update && apt-get install -y --no-install-recommends python3-torch python3-numpy ca-certificates' \
  || die "apt-get inside the chroot failed"
# The host's cache leaves before the image is cleaned (apt-get clean would empty it otherwise).
if [ ${#CACHE_ARGS[@]} -gt 0 ]; then umount "$R/var/cache/apt/archives"; fi
chroot "$R" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin sh -c 'apt-get clean && rm -rf /var/lib/apt/lists/*'
chroot "$R" python3 -c 'import torch, numpy; print("torch", torch.__version__, "numpy", numpy.__version__)' >&2 \
  || die "python3 cannot import torch in the image"
rm -f "$R/usr/sbin/policy-rc.d" "$R/etc/resolv.conf"
for m in dev/pts dev sys proc; do umount "$R/$m"; done

log "podman import -> $TAG"
tar -C "$R" -c . | "${PODMAN[@]}" import --change 'CMD ["/bin/bash"]' \
  --change 'LABEL org.gpugeek.accelerator=cpu' --change 'LABEL org.gpugeek.preset=pytorch' - "$TAG" >/dev/null
"${PODMAN[@]}" images --format '{{.Repository}}:{{.Tag}} {{.Size}}' | grep -F "${TAG%:*}" >&2 || true
log "done: jobs may use image: $TAG on agents started with this podman storage"

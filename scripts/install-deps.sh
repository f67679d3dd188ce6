#!/usr/bin/env bash
# Installs every build and test dependency of gpugeek from Debian 12 packages.
# Nothing is downloaded from anywhere else. Safe to run twice.
set -euo pipefail

packages=(
  # toolchain
  build-essential cmake ninja-build pkg-config clang clang-format libclang-rt-14-dev
  # libraries
  libabsl-dev nlohmann-json3-dev libyaml-cpp-dev libcli11-dev libspdlog-dev libfmt-dev
  libsqlite3-dev libcpp-httplib-dev libssl-dev zlib1g-dev libbrotli-dev libsodium-dev
  libncurses-dev
  # the PostgreSQL store (src/store/postgres_store.h): libpq to build, and the server and psql its tests start
  # (../shared/infra/postgres-up.sh; not run as a service)
  libpq-dev postgresql-15 postgresql-client-15
  # Slurm clusters in the pool (src/backends/slurm): sbatch and scontrol, and the daemons its tests start
  # (../shared/infra/slurm-up.sh: munged, slurmctld, slurmd, slurmrestd with JWT; not run as services)
  slurm-client slurmctld slurmd slurmrestd slurm-wlm-jwt-plugin munge
  # workdir archives (tar + zstd): src/archive
  libarchive-dev
  # dataset deduplication: xxHash's XXH3 for shingles and MinHash bands (src/data)
  libxxhash-dev
  # Boost.Beast and Boost.Asio (header-only) for the HTTP server
  libboost1.74-dev
  # HTTP/2 for the gateway's gRPC pass-through (src/gateway/h2_proxy.h)
  libnghttp2-dev
  # hyper-parameter search (src/hpo): Eigen for the GP's and CMA-ES's linear algebra, NLopt for optimising the
  # GP's likelihood and acquisition
  libeigen3-dev libnlopt-cxx-dev
  # tests and benchmarks
  libgtest-dev libgmock-dev libbenchmark-dev
  # tools used by scripts and tests; prometheus brings promtool and the server the monitoring test scrapes with
  python3 procps curl prometheus
  # the openssl command: src/http/tls_test drives `openssl s_client` against the TLS server
  openssl
  # examples/gpt trains with PyTorch on the CPU; OpenBLAS replaces the reference BLAS that python3-torch
  # links by default (libblas.so.3 alternative), ~35x faster matrix products on one core
  python3-torch libopenblas0-pthread
  # examples/gpt/serve.py: the GPT example as a service (FastAPI on uvicorn, WebSocket by python3-websockets), and
  # the real clients the gateway's tests drive through it (websockets, grpcio)
  python3-fastapi python3-uvicorn python3-websockets python3-grpcio
  # examples/gpt/export_engine.py: the onnx package (export, checker, QDQ edit) and OpenCV's DNN module, the ONNX
  # runtime Debian 12 ships
  python3-onnx python3-opencv
  # bench/hpo.sh measures our samplers and pruners beside Optuna's in one run (../shared/bench/hpo)
  python3-optuna python3-cmaes python3-scipy python3-sklearn
)
# Node.js and npm run the OpenAPI linter (tools/openapi: Redocly CLI, pinned by its package-lock.json). A
# node with npm installed otherwise is used as it is: NodeSource's nodejs, for one, bundles npm and
# conflicts with Debian's npm package.
if ! command -v npm >/dev/null 2>&1; then
  packages+=(nodejs npm)
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# Packages with a service (prometheus, postgresql-15, munge, slurmctld, slurmd) must not start it on install: the tests start their own, on
# loopback. policy-rc.d (invoke-rc.d(8)) refuses the start; it is removed again if we created it.
made_policy=0
if [ ! -e /usr/sbin/policy-rc.d ]; then
  printf '#!/bin/sh\nexit 101\n' | $SUDO tee /usr/sbin/policy-rc.d >/dev/null
  $SUDO chmod 755 /usr/sbin/policy-rc.d
  made_policy=1
fi
status=0
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" || status=$?
[ "$made_policy" -eq 1 ] && $SUDO rm -f /usr/sbin/policy-rc.d
exit "$status"

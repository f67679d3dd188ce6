#!/usr/bin/env bash
# The main job, end to end on the embedded default: installs the dependencies (Debian 12 packages),
# builds gpugeek, shows this host's GPUs, starts `gpugeek up` (server + agent; an emulated 8-GPU node
# when the host has no GPU; SQLite under ~/.local/share/gpugeek, or /var/lib/gpugeek as root), submits the Llama-2-70B LoRA
# example, which the planner sizes and the scheduler places, follows it to completion, prints
# where each step happened; then the main job for real: examples/gpt/ from its workdir, trained with
# PyTorch DDP (2 ranks through `launcher: torch`, about 20 s on 2 CPU cores), its loss falling in the
# followed log; shows the pool in `gpugeek top` and as Prometheus metrics; pushes the trained model to the
# server's model registry as safetensors, float32 and int8 (`gpugeek quantize`), and serves it behind the
# gateway as an A/B split of the two (examples/gpt-serve.yaml); and stops.
# Everything runs over TLS 1.3: `gpugeek up` makes a local CA and certificates on its first start and
# saves the CLI profile "local" (server, admin token, CA), so no command below needs a flag for them.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh gpugeek   # the CLI, server and agent (and gpugeek-shim); not the tests
step() { printf '\n\033[1m$ %s\033[0m\n' "$*"; "$@"; }

step build/gpugeek devices                    # real GPUs via NVML / ROCm SMI, if any
step build/gpugeek catalog

port=${GPUGEEK_PORT:-8470}              # the API: users, the CLI, Prometheus
agent_port=${GPUGEEK_AGENT_PORT:-8472}  # the agents' own listener (the in-process agent uses it)
url="https://127.0.0.1:$port"
log=$(mktemp -t gpugeek-up.XXXXXX.log)
# As root, the state goes where system daemons keep theirs: workloads run as the tenants' unprivileged
# users and must reach their working folders by path, which a folder under /root (mode 0700) forbids.
if [ "$(id -u)" = 0 ]; then data_dir=/var/lib/gpugeek; else data_dir="${XDG_DATA_HOME:-$HOME/.local/share}/gpugeek"; fi
printf '\n\033[1m$ build/gpugeek up --listen 127.0.0.1:%s --agent-listen 127.0.0.1:%s --data-dir %s &\033[0m   (log: %s)\n' \
  "$port" "$agent_port" "$data_dir" "$log"
build/gpugeek up --listen "127.0.0.1:$port" --agent-listen "127.0.0.1:$agent_port" --data-dir "$data_dir" >"$log" 2>&1 &
up_pid=$!
trap 'kill -TERM "$up_pid" 2>/dev/null; wait "$up_pid" 2>/dev/null || true' EXIT
for _ in $(seq 150); do
  if build/gpugeek nodes --server "$url" 2>/dev/null | grep -q " ready "; then break; fi
  if ! kill -0 "$up_pid" 2>/dev/null; then cat "$log"; echo "gpugeek up exited" >&2; exit 1; fi
  sleep 0.2
done
grep "^gpugeek up" "$log"

step build/gpugeek whoami --server "$url"        # `gpugeek up` saved the admin token as CLI profile "local"
step build/gpugeek nodes --server "$url"
out=$(mktemp -t gpugeek-submit.XXXXXX.log)
step build/gpugeek submit examples/llama2-70b-lora.yaml --follow --server "$url" | tee "$out"
id=$(sed -n 's/^submitted \(j-[0-9]*\).*/\1/p' "$out" | head -1)
step build/gpugeek events --job "$id" --server "$url"
# The main job for real: a GPT trained with DDP from its workdir (examples/gpt-train.yaml). At the end rank 0
# exports the trained weights to out/model/ (model.safetensors + config.json) in the job's working folder.
train_out=$(mktemp -t gpugeek-train.XXXXXX.log)
step build/gpugeek submit examples/gpt-train.yaml --follow --server "$url" | tee "$train_out"
train_id=$(sed -n 's/^submitted \(j-[0-9]*\).*/\1/p' "$train_out" | head -1)
# The same training from a dataset version on the server (examples/gpt-train-dataset.yaml): the texts
# pushed once as a version (content-defined chunks; a later push sends only what changed), the job names
# `dataset: licenses@main`, and the node fetches the version by digest and checks it out read-only.
step build/gpugeek data push -L /usr/share/common-licenses --dataset licenses --remote -m "Debian licence texts" --server "$url"
step build/gpugeek data log --dataset licenses --remote --server "$url"
step build/gpugeek submit examples/gpt-train-dataset.yaml --follow --server "$url"
step build/gpugeek pool --server "$url"
step build/gpugeek top --once --server "$url"   # the live view: `gpugeek top` refreshes it every second
server_dir="$data_dir/server"
token_file="$server_dir/admin.token"
ca_file="$server_dir/tls/ca.crt"  # the local CA `gpugeek up` made; the CLI profile "local" trusts it too
printf '\n\033[1m$ curl -s --cacert %s -H "Authorization: Bearer $(cat %s)" %s/metrics | grep ...\033[0m   (docs/metrics.md, deploy/)\n' \
  "$ca_file" "$token_file" "$url"
metrics=$(curl -s --fail --cacert "$ca_file" -H "Authorization: Bearer $(cat "$token_file")" "$url/metrics")
echo "$metrics" | grep -E '^gpugeek_(pool_gpus|pool_allocated_milligpus|pool_fragmentation_ratio|jobs|job_transitions_total)[{ ]' || true

# The trained model into the server's registry (docs/models.md): the folder train.py exported is in the job's
# working folder on this node, <agent data dir>/work/JOB-0 (docs/job-spec.md; the agent keeps it after the job
# ends; as root it is the tenant user's, 0700, and root reads it). Branch fp32 gets it as trained, branch int8
# the same weights quantised per output row (`--skip embeddings`: the token embedding is also the output head);
# each version is also tagged with the job that trained it (tags never move; a rerun trains in a new job, so new
# tags, and moves the branches to its weights; identical weights push nothing: "already this folder").
trained="$data_dir/agent/work/$train_id-0/out/model"
step build/gpugeek model push "$trained" --name gpt --branch fp32 --tag "$train_id-fp32" \
  -m "examples/gpt trained by $train_id" --server "$url"
int8_dir=$(mktemp -d -t gpugeek-gpt-int8.XXXXXX)
step build/gpugeek quantize "$trained/model.safetensors" --to int8 --skip embeddings --out "$int8_dir/model.safetensors"
cp "$trained/config.json" "$int8_dir/"
step build/gpugeek model push "$int8_dir" --name gpt --branch int8 --tag "$train_id-int8" \
  -m "examples/gpt trained by $train_id, int8 (gpugeek quantize --skip embeddings)" --server "$url"
rm -rf "$int8_dir"
step build/gpugeek model ls --server "$url"

# A model service: that model behind the gateway `gpugeek up` runs on 127.0.0.1:8480, two versions in a 90/10 A/B
# split (examples/gpt-serve.yaml): v1 the trained weights (weights: gpt@fp32), v2 the int8 ones (gpt@int8), each
# replica reading its version's checkout in $GPUGEEK_MODEL_DIR. A replica resolves its branch when it starts, so a
# rerun first deletes the service an earlier run left (its replicas would come back on that run's weights). The
# first request waits in the gateway's activator while a replica starts (and its node fetches the model). The
# service takes callers' gpugeek API tokens (`traffic.auth: token`): here the admin's; without one, 401.
gateway="https://127.0.0.1:${GPUGEEK_GATEWAY_PORT:-8480}"  # TLS 1.3 with the local CA's certificate, as the API
if build/gpugeek services --server "$url" | grep -q '^gpt '; then
  step build/gpugeek service delete gpt --server "$url"
fi
step build/gpugeek serve examples/gpt-serve.yaml --server "$url"
for i in $(seq 1 40); do
  code=$(curl -s --cacert "$ca_file" -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $(cat "$token_file")" \
    -H 'Host: gpt' -H 'Content-Type: application/json' \
    -d '{"prompt": "The ", "max_tokens": 8}' --max-time 120 "$gateway/predict") || true
  [ "$code" = 200 ] && break
  sleep 0.5   # the gateway learns of the new service within a second
done
printf '\n\033[1m$ curl --cacert %s -H "Host: gpt" %s/predict   (no token)\033[0m\n' "$ca_file" "$gateway"
curl -s --cacert "$ca_file" -H 'Host: gpt' -w '%{http_code}\n' "$gateway/predict" || true
printf '\n\033[1m$ curl --cacert %s -H "Authorization: Bearer $(cat %s)" -H "Host: gpt" -d {"prompt": "The ", "max_tokens": 8} %s/predict   (x 100; each answer once, with its count)\033[0m\n' "$ca_file" "$token_file" "$gateway"
answers=$(mktemp -t gpugeek-answers.XXXXXX.jsonl)
for i in $(seq 1 100); do
  curl -s --fail --cacert "$ca_file" -H "Authorization: Bearer $(cat "$token_file")" -H 'Host: gpt' \
    -H 'Content-Type: application/json' -d '{"prompt": "The ", "max_tokens": 8}' "$gateway/predict" >>"$answers"
  echo >>"$answers"
done
sort "$answers" | uniq -c   # the trained model's continuation, from v1 (fp32) and v2 (int8)
rm -f "$answers"
step build/gpugeek replicas gpt --server "$url"
sleep 1.5   # the gateway reports what it served each second
step build/gpugeek top --once --server "$url"
step build/gpugeek services --server "$url"   # REQUESTS, TOKENS: the serverless meter's counts (docs/billing.md)
agent_metrics="https://127.0.0.1:${GPUGEEK_AGENT_METRICS_PORT:-8471}/metrics"
printf '\n\033[1m$ curl -s --cacert %s %s | grep gpugeek_gateway_requests_total\033[0m\n' "$ca_file" "$agent_metrics"
curl -s --fail --cacert "$ca_file" "$agent_metrics" | grep '^gpugeek_gateway_requests_total' || true

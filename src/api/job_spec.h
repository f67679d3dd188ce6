#pragma once
// JobSpec: what a user submits (YAML, shape of ARCHITECTURE.md "Job spec"; reference in
// docs/job-spec.md).
//
//   name: llama2-70b-lora
//   model: models/Llama-2-70b-hf.json     # optional: lets the planner size the job
//   task: {kind: lora, seq_len: 4096, micro_batch: 1, tokens: 2e8}
//   resources:
//     accelerators: A100-80GB:4           # or a list: any one of them will do
//     spot: true                          # or capacity: spot | on-demand | reserved
//     cpus: 32
//     memory: 256Gi
//     regions: [cn-east-1]
//   num_nodes: 1
//   priority: 0
//   checkpoint: {dir: /ckpt/llama2, grace: 30s}
//   env: {HF_HOME: /cache, HF_TOKEN: {secret: hf}}   # a value, or a reference to a tenant's secret
//   workdir: .                            # packed and uploaded by `gpugeek submit` (workdir_digest)
//   setup: pip install -r requirements.txt
//   run: torchrun --nproc-per-node $GPUGEEK_GPUS_PER_NODE train.py
//
// Parsing is strict: an unknown field, a wrong type or a bad value is InvalidArgument whose message
// starts with the field's path (e.g. "resources.accelerators[1]: ...") and says how to fix it. GPU
// model names are resolved through the GPU catalog to catalog ids.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "common/clock.h"
#include "hw/gpu_catalog.h"

namespace gpugeek::api {

enum class TaskKind { kInference, kLora, kQlora, kFull, kPretrain };
std::string_view TaskKindName(TaskKind k);  // "inference", "lora", "qlora", "full", "pretrain"

struct TaskSpec {
  TaskKind kind = TaskKind::kInference;
  int64_t seq_len = 0;       // tokens per sequence; 0 = planner default
  int64_t micro_batch = 0;   // sequences per GPU per step; 0 = planner default
  int64_t global_batch = 0;  // sequences per optimizer step; 0 = planner default
  int64_t tokens = 0;        // training token budget; 0 = none given
};

// Capacity types, as clouds sell GPUs: on-demand (never reclaimed), spot (cheap, reclaimable at
// short notice) and reserved (committed capacity).
enum class CapacityType { kOnDemand, kSpot, kReserved };
std::string_view CapacityTypeName(CapacityType c);  // "on-demand", "spot", "reserved"

// One acceptable GPU shape per node: `count` GPUs of `model`, each with `milli_per_gpu` of it
// (1000 = the whole GPU; < 1000 only with count 1, GPU sharing as in the Alibaba traces).
struct AcceleratorRequest {
  std::string model;  // catalog id ("A100-SXM-80GB"), or the raw name when unknown to the catalog
  int count = 0;
  int64_t milli_per_gpu = 1000;
};

struct Resources {
  std::vector<AcceleratorRequest> any_of;  // alternatives; empty = the planner chooses
  // The capacity types the job accepts, in preference order: {kSpot, kOnDemand} = spot first, on-demand
  // when no spot node fits (`capacity: [spot, on-demand]`); one entry = only that type; empty = any.
  std::vector<CapacityType> capacity;
  int64_t cpu_milli = 0;             // per node; 0 = scheduler default
  uint64_t memory_bytes = 0;         // per node; 0 = scheduler default
  std::vector<std::string> regions;  // allowed regions; empty = any
  // A multi-node job's nodes may be in different regions (`span_regions: true`); by default they are all
  // in one region (the scheduler tries each in turn), since its ranks talk over the network every step.
  bool span_regions = false;
  // Where the job's data lives (`data_region: us-east-1`; "" = nowhere in particular): placement tries
  // that region first, then the others nearest first (api/region_latency.h). Once the job has reported a
  // checkpoint, the region of that checkpoint comes first instead (what it resumes from). A preference:
  // `regions` is the constraint.
  std::string data_region;
};

struct CheckpointSpec {
  std::string dir;                            // empty = no checkpointing
  Duration grace = std::chrono::seconds(30);  // SIGTERM-to-SIGKILL time to write a checkpoint
};

// Why a placement of a job ended before the job did: its own error (a member exited non-zero, was
// killed or failed to start), the loss of a node (down: its lease expired), or preemption (a spot
// reclaim, a higher-priority job).
enum class RetryCause { kError, kNodeFailure, kPreemption };
std::string_view RetryCauseName(RetryCause c);  // "error", "node-failure", "preemption"
inline constexpr RetryCause kRetryCauses[] = {RetryCause::kError, RetryCause::kNodeFailure, RetryCause::kPreemption};

// `retry: {on: [error, node-failure], limit: 3, backoff: 10s..10m}`. Each cause in `on` has its own
// budget of `limit` retries (a job error does not use up the node-failure budget); the n-th retry of a
// cause waits min(backoff_min x 2^(n-1), backoff_max) before the job may be placed again (`backoff: 30s`
// is a fixed wait). A cause not in `on` ends the job FAILED. Without `retry:`, the default: a node
// failure is retried at once and without limit, an error fails the job.
struct RetrySpec {
  std::vector<RetryCause> on;  // distinct, in kRetryCauses order; at least one
  int limit = 3;               // retries per cause, 1..1000
  Duration backoff_min = std::chrono::seconds(10);
  Duration backoff_max = std::chrono::minutes(10);  // >= backoff_min
};

// A GPU below this utilisation (percent, NVML's "a kernel ran" share of the sample period) is idle
// for JobSpec::idle_timeout.
inline constexpr uint32_t kIdleUtilizationPercent = 1;

// One archive of `files:` as the server gets it (JobSpec::file_archives).
struct FileArchive {
  std::string path;    // where in the working folder it is unpacked; "" = the working folder itself
  std::string digest;  // the uploaded archive's SHA-256, 64 lower-case hex digits
  bool operator==(const FileArchive&) const = default;
};
inline constexpr size_t kMaxFiles = 64;

// `elastic: {min_nodes: N}` of a multi-node job: what a lost node costs the gang (ARCHITECTURE.md,
// "Elastic gangs"; torchrun's --nnodes=MIN:MAX in spirit). Only the lost nodes' members are replaced,
// beside the survivors (same GPU model and count, off their nodes, in their region unless span_regions);
// the survivors keep their GPUs and every member restarts in the next epoch, resuming from the last
// checkpoint. When no replacement fits, the gang goes on with its survivors if there are at least
// min_nodes of them (ranks renumbered from 0, WORLD_SIZE smaller); with fewer it is requeued whole.
struct ElasticSpec {
  int min_nodes = 1;  // 1..num_nodes
  bool operator==(const ElasticSpec&) const = default;
};

struct JobSpec {
  std::string name;   // DNS label: [a-z0-9-], 1..63 characters, starts and ends alphanumeric
  std::string model;  // path of a Hugging Face config.json; empty = none
  std::optional<TaskSpec> task;
  Resources resources;
  int num_nodes = 1;  // gang size: all nodes start together or none does
  // Unset: a lost node requeues the whole gang (stopped everywhere, placed again).
  std::optional<ElasticSpec> elastic;
  int priority = 0;  // higher runs first; -1000..1000
  CheckpointSpec checkpoint;
  std::map<std::string, std::string> env;  // literal values
  // Variables whose value is a secret of the job's tenant (`env: {HF_TOKEN: {secret: hf}}`): variable ->
  // secret name. The spec keeps only the name; the control plane puts the value into the assignments of
  // the job's own members and nowhere else. A variable is in `env` or here, never both.
  std::map<std::string, std::string> secret_env;
  // The user's code folder, as written in the spec: a path on the submitting machine, relative to the
  // spec file's folder. Client side only: `gpugeek submit` packs and uploads it, then sends the spec
  // with `workdir_digest` set and this cleared. The server refuses a spec that still names one.
  std::string workdir;
  // The uploaded workdir archive's SHA-256 (64 lower-case hex digits; archive/digest.h): the agent
  // unpacks it into each member's working folder before `setup` and `run`. Empty = an empty folder.
  std::string workdir_digest;
  // `files: {DEST: SRC}`, as written: SRC is a path on the submitting machine (relative to the spec
  // file's folder), DEST a path in the working folder (IsSafeRelativePath). Client side only, like
  // `workdir`: `gpugeek submit` uploads each and sends `file_archives` instead. At most kMaxFiles.
  std::map<std::string, std::string> files;
  // Uploaded archives unpacked into the working folder after the workdir and before `setup`, in order:
  // each {path, digest} goes into <working folder>/path ("" = the folder itself). At most kMaxFiles.
  std::vector<FileArchive> file_archives;
  // `dataset: NAME@REV` (REV defaults to main): a version of one of the tenant's datasets on the server
  // (`gpugeek data push --remote`, data/version_store.h). Each node fetches its objects once, caches them
  // by digest, checks the version out read-only and gives every member its folder in
  // $GPUGEEK_DATASET_DIR. At admission the server resolves REV to the commit's digest and stores the spec
  // with that digest as REV, so every placement and retry reads the same bytes. `dataset` is 1..64 of
  // [A-Za-z0-9._-] (not starting with '.' or '-'); `dataset_rev` a branch, tag, commit digest or prefix,
  // optionally with ~N. Both empty = no dataset.
  std::string dataset;
  std::string dataset_rev;
  // `weights: [OWNER/]NAME@REV` (REV defaults to main): a version of a model in the server's registry
  // (`gpugeek model push`), the caller's own or one OWNER granted its tenant a right on
  // (controlplane/model_registry.h): `deploy` for a job whose task is inference (or that names no task),
  // `finetune` for a training task. Fetched and checked out by each node like `dataset` and given to
  // every member in $GPUGEEK_MODEL_DIR. Admission pins REV to the commit's digest. All empty = none.
  std::string weights_owner;  // "" = the job's tenant
  std::string weights;
  std::string weights_rev;
  // `weights_signer: PATH`: the public key (PEM, `gpugeek model keygen`'s KEY.pub.pem) the model's
  // signature (its model.sig, `gpugeek model sign`) must verify with; each node verifies every file of the
  // checkout before a member starts and fails the start naming each problem. A path on the submitting
  // machine, relative to the spec file: `gpugeek submit` reads it and sends `weights_signer_pem` (at most
  // kMaxSignerPemBytes) instead; the server refuses a spec that still names a path.
  std::string weights_signer;
  std::string weights_signer_pem;
  // Shell commands run once per node per placement, in the working folder, before `run`; a non-zero
  // exit fails the member ("setup failed (exit N)") and `run` does not start. Empty = none.
  std::string setup;
  std::string run;                 // shell command run on every node
  std::optional<RetrySpec> retry;  // unset: the default policy (RetrySpec)
  // `max_duration: 2h`: a placement that has run this long ends the job FAILED with that reason (its
  // members are stopped as for a cancel). Counted from the placement, so each retry has the whole of it.
  // 1s..365 days; unset = no limit.
  std::optional<Duration> max_duration;
  // `idle_timeout: 30m`: a running job whose GPUs all report a utilisation below kIdleUtilizationPercent
  // for this long ends FAILED with that reason (members stopped as for a cancel). A GPU that reports no
  // utilisation counts as busy (no data never stops a job). Counted while RUNNING, from the placement's
  // start or the last busy sample. 1s..365 days; unset = never.
  std::optional<Duration> idle_timeout;
  // `max_cost: 5.00`: what the job may cost in all, in the pool's currency (integer micro-units here): its
  // placements' metered GPU time at their nodes' prices. Once reached, the job is stopped as for a cancel
  // (SIGTERM first: its checkpoint moment) with a "budget:" reason (controlplane/controllers/budget.h).
  // 0.000001..1000000000; unset = no cap.
  std::optional<int64_t> max_cost_micros;
  // `max_price: 2.50`: only nodes priced at most this per GPU-hour (unpriced nodes too; sched::PriceFit).
  // 0.000001..1000000000; unset = any price.
  std::optional<int64_t> max_price_micros;
  // `launcher: torch` starts `run` as procs_per_node processes on each node with the env:// variables
  // of PyTorch's init_process_group (RANK, LOCAL_RANK, WORLD_SIZE, ...; agent/torch_launcher.h);
  // "" runs it once per node.
  std::string launcher;
  // Processes per node under a launcher, 1..64; 0 = one per GPU of the member (one for a CPU job).
  int procs_per_node = 0;
  // `image: NAME[:TAG]`: each member runs in a container of this local image (podman on the node), in
  // canonical form ("busybox" -> "localhost/busybox:latest", api/image_ref.h); only nodes that have it
  // are chosen. "" = on the host.
  std::string image;
  // `engine: FORMAT`: the compiled-engine format the job loads (torchscript, onnx, onnx-int8, tensorrt;
  // api/engines.h): only nodes that report a runtime of it are chosen, and members get GPUGEEK_ENGINE and
  // GPUGEEK_ENGINE_RUNTIMES. "" = none.
  std::string engine;
};

// OK when `name` is a valid secret name: 1-128 of [A-Za-z0-9._-], starting with a letter or digit.
// Otherwise InvalidArgument naming `field` and the rule.
absl::Status ValidateSecretName(std::string_view field, std::string_view name);

// Parses and validates a job spec from YAML text. `catalog` resolves GPU names.
// Bounded for text from outside, each limit an InvalidArgument naming it: at most 1 MiB of text, 10,000
// '[' and '{' characters, one document with content, 100,000 values nested at most 64 deep (all checked
// before yaml-cpp builds a tree), and the same once aliases are expanded, each counting as a copy of
// what it names (checked on the loaded tree).
absl::StatusOr<JobSpec> ParseJobSpec(std::string_view yaml_text,
                                     const hw::GpuCatalog& catalog = hw::GpuCatalog::Builtin());

// A model of the registry (controlplane/model_routes.h) as `[OWNER/]NAME[@REV]`: OWNER the tenant that owns
// it ("" = the caller's), NAME as a dataset's name, REV a branch, tag or commit digest ("main" when not
// given). InvalidArgument whose message starts with `field` and shows the form.
inline constexpr size_t kMaxSignerPemBytes = 16 * 1024;

struct ModelRef {
  std::string owner;
  std::string name;
  std::string rev;
};
absl::StatusOr<ModelRef> ParseModelRef(const std::string& text, const std::string& field);

// Whether a job spec's `env` may set variable `name`. OK, or InvalidArgument whose message starts with
// the field ("env.LD_PRELOAD: ...") and says why and how to fix the spec. Refused: names that are not
// letters, digits and '_' (or start with a digit); variables that steer the dynamic loader, libc or the
// launcher shell of every process of the job (LD_*, GLIBC_TUNABLES, GCONV_PATH, NLSPATH, LOCPATH, DYLD_*,
// BASH_ENV, ENV, IFS); and those gpugeek sets itself (GPUGEEK_*, CUDA_VISIBLE_DEVICES, CUDA_DEVICE_ORDER,
// HIP_VISIBLE_DEVICES, ROCR_VISIBLE_DEVICES, HOME). PYTHONPATH and the other PYTHON* and MALLOC_* variables
// are allowed. The reason per entry is beside the list in job_spec.cc. ParseJobSpec applies it to every
// key. An agent should apply it to the env of each assignment it receives as well, so that a server that
// skipped it (or an impostor) cannot slip one in.
absl::Status CheckJobEnvName(std::string_view name);

// Parses one accelerator item: "A100-80GB:4", "H100-SXM-80GB" (count 1), "T4:0.5" (500 milli-GPU).
absl::StatusOr<AcceleratorRequest> ParseAcceleratorRequest(std::string_view text, const hw::GpuCatalog& catalog);

// Renders a spec back to YAML that ParseJobSpec accepts and that parses to an equal spec.
std::string JobSpecToYaml(const JobSpec& spec);

}  // namespace gpugeek::api

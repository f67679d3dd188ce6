#pragma once
// The wire protocol between the control plane and its agents (JSON over HTTP, under /v1/agents).
//
//   POST /v1/agents/register            Registration          -> RegistrationReply
//   POST /v1/agents/{node}/heartbeat     Heartbeat             -> HeartbeatReply
//
// Desired state, not commands: every HeartbeatReply lists ALL assignments the node should hold
// now. The agent reconciles: it starts a listed assignment it is not running, stops one marked
// `cancel`, and stops anything it runs that is no longer listed. Replies can be lost or repeated
// and a restarted server sends the same list, so the agent does nothing twice.
//
// Fencing: every assignment carries the job's epoch, raised by the control plane on each new
// placement. An agent never starts an assignment whose epoch is lower than one it has already seen
// for that job, so a stale reply (e.g. from before a requeue) cannot run a gang member twice.
//
// An agent reports each workload it holds in every heartbeat (running, or exited with its code)
// until the assignment disappears from the reply, and ships new log bytes with it.
//
// Leases: an agent that has not had a heartbeat answered 2xx for `RegistrationReply::lease_ms`
// (measured from the SEND time of the last answered one, on its monotonic clock) fences itself: it
// cancels every workload with grace min(grace_ms, fence_grace_ms) and starts nothing until a
// heartbeat is answered again. The server counts its lease from its RECEIPT of the last heartbeat,
// which is never earlier, and re-places a lost node's work only after lease_ms + fence_grace_ms plus
// a margin; so one gang member never runs in two places (agent/agent.h has the timeline).
//
// Log bytes are raw bytes (a workload may print anything); on the wire they are base64
// ("data_b64"), so every byte round-trips exactly through JSON.
//
// Decoders are strict and bounded: unknown keys, wrong types, node names outside
// [A-Za-z0-9][A-Za-z0-9._-]{0,127}, strings and lists over the limits below are InvalidArgument naming
// the field path.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "api/job_spec.h"
#include "hw/device.h"

namespace gpugeek::api {

// Limits the decoders enforce (a heartbeat is at most a few MiB; these keep a bad peer from making a
// decoder allocate without bound).
inline constexpr size_t kMaxNodeNameBytes = 128;
inline constexpr size_t kMaxUuidBytes = 128;                         // a GPU UUID or an instance id
inline constexpr size_t kMaxMessageBytes = 4096;                     // WorkloadReport::message
inline constexpr size_t kMaxGpusPerNode = 64;                        // Assignment::gpu_uuids, Heartbeat::samples
inline constexpr size_t kMaxReportsPerHeartbeat = 4096;              // Heartbeat::workloads, and logs
inline constexpr size_t kMaxLogChunkBytes = size_t{1} << 20;         // LogChunk::data, decoded
inline constexpr size_t kMaxImagesPerNode = 1024;                    // Registration::images
inline constexpr size_t kMaxUnfitReasonBytes = 512;                  // a Registration::unfit_images reason
inline constexpr int64_t kMaxPriceMicrosPerGpuHour = 1'000'000'000;  // 1,000 currency units per GPU-hour

struct Registration {
  std::string node;     // node name, unique in the pool
  std::string address;  // how gang peers reach this node (GPUGEEK_MASTER_ADDR), e.g. "10.0.0.7"
  hw::NodeInventory inventory;
  std::string capacity_type = "on-demand";  // on-demand | spot | reserved
  std::string region;
  // What a GPU-hour of this node costs, in integer micro-units of the pool's currency (`gpugeek agent
  // --gpu-hour-price 0.85` = 850000); 0 = not priced. JSON "price_micros_per_gpu_hour", optional,
  // 0..kMaxPriceMicrosPerGpuHour. Usage is metered against it per second (controlplane/usage.h).
  int64_t price_micros_per_gpu_hour = 0;
  // The shortest rental its provider sells: a member's segment on this node is charged at least this long
  // (`gpugeek agent --min-rental 10m`); 0 = per second from the first. JSON "min_rental_s", optional,
  // 0..kMaxMinRentalS.
  int64_t min_rental_s = 0;
  // Labels (`gpugeek agent --label k=v`). kProviderLabel is set by the server from the node's join token
  // (controlplane/node_authority.h), never taken from the agent.
  std::map<std::string, std::string> labels;
  // "host:port" where the agent serves Prometheus metrics (GET /metrics); empty when it serves none.
  // Optional on the wire (JSON key "metrics_address"); GET /v1/prometheus/targets lists it.
  std::string metrics_address;
  // Whether that listener speaks TLS (https://): the server then relays `gpugeek exec` to it over TLS,
  // trusting only its own CA. JSON "metrics_tls", optional (default false; written only when true).
  bool metrics_tls = false;
  // Drawn once per agent process start (NewInstanceId): the same node name with a new instance id is a
  // restarted agent (it holds nothing it did not start), the same instance id a reconnecting one.
  // JSON "instance_id"; optional on the wire (empty: unknown), at most kMaxUuidBytes.
  std::string instance_id;
  // The container images the node can run (JobSpec::image), canonical ("localhost/busybox:latest",
  // api/image_ref.h), sorted, no duplicates; empty when the agent runs no containers. JSON "images",
  // optional; at most kMaxImagesPerNode. The agent registers again when its list changes.
  std::vector<std::string> images;
  // Images the node holds but cannot run (agent/image_requirements.h: the image's CUDA/ROCm/driver labels
  // ask for more than the node's driver supports), canonical name -> why (at most kMaxUnfitReasonBytes).
  // Never placed on; `gpugeek images` shows them. JSON "unfit_images", optional; at most kMaxImagesPerNode.
  std::map<std::string, std::string> unfit_images;
  // The compiled-engine runtimes the node has ("onnxruntime", "tensorrt"; api/engines.h, found by
  // agent/engine_runtimes.h or declared with --engines), sorted, no duplicates. JSON "engines", optional;
  // at most kMaxEngineRuntimesPerNode.
  std::vector<std::string> engines;
};

struct RegistrationReply {
  int64_t heartbeat_interval_ms = 1000;
  // The agent's lease: it fences itself (cancels all its workloads) once this long has passed since it
  // SENT its last heartbeat that was answered 2xx. 100 .. 3,600,000 ms.
  int64_t lease_ms = 3000;
  // The longest SIGTERM-to-SIGKILL grace a fenced agent gives a workload (it uses min(grace_ms, this)).
  // 0 .. 3,600,000 ms.
  int64_t fence_grace_ms = 2000;
  // On a node's first registration (with a join token): its node credential (auth/node_credential.h),
  // to keep and present on every later call. "" when the agent registered with its credential.
  std::string node_credential;
  // The bearer token the server presents to this agent's node API listener (the one serving /metrics)
  // on `POST /v1/exec`: 64 random hex digits drawn at each registration, held only in memory by both.
  // "" from a server that relays no exec (the agent then refuses every exec). At most 256 bytes.
  std::string exec_token;
};

// One member of a job placed on this node.
struct Assignment {
  std::string job_id;
  int64_t epoch = 0;
  int node_rank = 0;
  int num_nodes = 1;
  // The GPUs, by hw::GpuDevice::uuid (indices change when a GPU is added, removed or the driver
  // re-enumerates; a UUID does not). At most kMaxGpusPerNode, each 1..kMaxUuidBytes bytes.
  std::vector<std::string> gpu_uuids;
  int64_t gpu_milli = 0;      // per GPU (1000 = whole)
  int64_t cpu_milli = 0;      // limit; 0 = none
  uint64_t memory_bytes = 0;  // limit; 0 = none
  std::string master_addr;    // address of rank 0's node
  int master_port = 0;
  std::string run;
  std::map<std::string, std::string> env;
  std::string checkpoint_dir;
  int64_t grace_ms = 30000;  // SIGTERM to SIGKILL
  int restart_count = 0;
  bool cancel = false;  // stop it: SIGTERM to the group, grace, SIGKILL
  // The job's tenant ("" = the default tenant): the agent runs the member as that tenant's own
  // unprivileged user (agent/executor.h RunAsOptions).
  std::string tenant;
  // The job's workdir archive (JobSpec::workdir_digest, 64 hex digits; "" = none): the agent fetches it
  // (GET /v1/agents/{node}/archives/{digest}), verifies the digest and unpacks it into the member's
  // working folder before `setup` and `run`. Optional on the wire.
  std::string workdir_digest;
  // The job's `files:` archives (JobSpec::file_archives): each fetched like the workdir and unpacked into
  // <working folder>/path, in order, after the workdir. Optional on the wire; at most kMaxFiles.
  std::vector<FileArchive> file_archives;
  // The job's dataset version (JobSpec::dataset, and the commit digest admission resolved its revision
  // to, 64 hex digits; both "" = none): the agent fetches the version's objects
  // (GET /v1/agents/{node}/datasets/{commit}/objects/{digest}), caches them by digest, checks the version
  // out read-only once per node and sets GPUGEEK_DATASET_DIR (and GPUGEEK_DATASET=NAME@COMMIT) for the
  // member. Optional on the wire.
  std::string dataset;
  std::string dataset_commit;
  // The job's model weights (JobSpec::weights): the tenant that owns the model, its name and the commit
  // admission pinned (all "" = none). Fetched like the dataset
  // (GET /v1/agents/{node}/models/{commit}/objects/{digest}) into the node's model cache; the member gets
  // GPUGEEK_MODEL_DIR and GPUGEEK_MODEL=OWNER/NAME@COMMIT. Optional on the wire.
  std::string model_owner;
  std::string model;
  std::string model_commit;
  // JobSpec::weights_signer_pem: the public key the checkout's model.sig must verify with ("" = none).
  std::string model_signer_pem;
  // Shell commands run in the working folder before `run`, once per placement (JobSpec::setup); "" = none.
  std::string setup;
  // JobSpec::launcher: "torch" runs `run` as procs_per_node local ranks (agent/torch_launcher.h); "" once.
  // Optional on the wire.
  std::string launcher;
  int procs_per_node = 0;  // 0 = one per GPU of the member (one without GPUs); at most 64
  // The planner's layout for a planner-sized job, placed on the alternative of its GPU model (tensor,
  // pipeline and data parallel degrees; GPUGEEK_TP/_PP/_DP for the workload); 0 = no plan. Optional.
  int tp = 0, pp = 0, dp = 0;
  // The plan's ZeRO stage (0..3) and micro-batch (sequences per GPU per pass) on that alternative
  // (GPUGEEK_ZERO_STAGE, GPUGEEK_MICRO_BATCH); micro_batch 0 = no plan. Optional.
  int zero_stage = 0;
  int64_t micro_batch = 0;
  // JobSpec::image, canonical ("localhost/busybox:latest"): the member runs in a container of this
  // image (agent/container_command.h); "" = on the host. Optional on the wire.
  std::string image;
  // JobSpec::engine: the compiled-engine format the member loads (api/engines.h; "" = none). The member
  // gets GPUGEEK_ENGINE and GPUGEEK_ENGINE_RUNTIMES (this node's runtimes of it). Optional on the wire.
  std::string engine;
  // Variables the platform sets for this job beside `env` (store::JobRecord::platform_env): a trial's
  // GPUGEEK_EXPERIMENT, GPUGEEK_TRIAL_ID and GPUGEEK_PARAMS, a service replica's PORT, GPUGEEK_SERVICE and
  // GPUGEEK_SERVICE_VERSION; no other name (kPlatformEnvNames), each value
  // at most kMaxPlatformEnvValueBytes. Optional on the wire.
  std::map<std::string, std::string> platform_env;
  // How many of this member's metric reports (WorkloadReport::metrics) of this epoch the server has
  // stored: the agent resends those from this seq on and forgets the others. Optional on the wire (0).
  int64_t metrics_stored = 0;
};

// One value a member's workload reported at one step (`gpugeek report --step N --value V`,
// agent/workload_listener.h), numbered per member and placement: seq 0, 1, 2, ...
struct MetricPoint {
  int64_t seq = 0;   // 0..kMaxMetricSeq
  int64_t step = 0;  // 0..kMaxCheckpointStep
  double value = 0;  // finite
};
// A service replica's (controlplane/controllers/deployment.h): PORT, GPUGEEK_SERVICE, GPUGEEK_SERVICE_VERSION.
inline constexpr const char* kPlatformEnvNames[] = {
    "GPUGEEK_EXPERIMENT", "GPUGEEK_TRIAL_ID", "GPUGEEK_PARAMS", "PORT", "GPUGEEK_SERVICE", "GPUGEEK_SERVICE_VERSION"};
inline constexpr size_t kMaxPlatformEnvValueBytes = 64 * 1024;
// InvalidArgument naming `field` unless `name` is one of kPlatformEnvNames and `value` fits.
absl::Status CheckPlatformEnv(const std::string& field, const std::string& name, const std::string& value);
inline constexpr size_t kMaxMetricsPerReport = 1024;  // WorkloadReport::metrics; also what an agent holds per member
inline constexpr int64_t kMaxMetricSeq = int64_t{1} << 53;

enum class WorkloadPhase { kRunning, kExited, kFailedToStart };

// How an exit report's message starts when the agent itself stopped the member because it lost contact
// with the server (the fence): the workload did not fail, whatever its exit status; the server counts it
// as a node failure.
inline constexpr char kFencedPrefix[] = "fenced: ";

struct WorkloadReport {
  std::string job_id;
  int64_t epoch = 0;
  WorkloadPhase phase = WorkloadPhase::kRunning;
  std::optional<int> exit_code;  // when exited normally
  int term_signal = 0;           // when killed by a signal
  std::string message;           // e.g. why it failed to start, "OOM-killed"; at most kMaxMessageBytes
  int node_rank = 0;             // which member (a node may hold several members of one gang)
  // The last checkpoint step this member's workload reported complete (`gpugeek checkpoint --step N`,
  // docs/checkpointing.md), resent on every beat; nullopt = none this placement. 0..kMaxCheckpointStep.
  std::optional<int64_t> checkpoint_step;
  // An exit report: how long before this heartbeat was sent its workload ended, in milliseconds by the
  // agent's monotonic clock (no clock skew), 0..kMaxEndedAgoMs; 0 = now, or not known. The server meters
  // the member up to then (controlplane/controllers/metering.h): an exit it hears of late (it was down, or
  // the agent could not reach it) is not billed for the wait.
  int64_t ended_ms_ago = 0;
  // The member's metric reports the server has not acknowledged yet (Assignment::metrics_stored), by seq,
  // consecutive. At most kMaxMetricsPerReport.
  std::vector<MetricPoint> metrics;
};
inline constexpr std::string_view kProviderLabel = "provider";
inline constexpr int64_t kMaxMinRentalS = 7 * 24 * 3600;         // a week
inline constexpr int64_t kMaxCheckpointStep = int64_t{1} << 53;  // exact in a JSON double
inline constexpr int64_t kMaxEndedAgoMs = 7 * 24 * 3'600'000;    // a week

struct LogChunk {
  std::string job_id;
  int node_rank = 0;
  uint64_t offset = 0;  // byte offset of `data` in the member's log for this epoch
  // Raw bytes, any values (not necessarily UTF-8), at most kMaxLogChunkBytes. JSON "data_b64": base64.
  std::string data;
  int64_t epoch = 0;  // the assignment's epoch: each placement of a job has its own log
};

struct Heartbeat {
  std::string node;
  std::string instance_id;             // as in the agent's Registration; JSON "instance_id", optional
  std::vector<hw::GpuSample> samples;  // one per GPU, device index order
  std::vector<WorkloadReport> workloads;
  std::vector<LogChunk> logs;
};

struct HeartbeatReply {
  std::vector<Assignment> assignments;
  // NotFound-like signal: the server does not know this node (e.g. its store was wiped); the agent
  // registers again.
  bool reregister = false;
};

nlohmann::json ToJson(const Registration& r);
nlohmann::json ToJson(const RegistrationReply& r);
nlohmann::json ToJson(const Assignment& a);
nlohmann::json ToJson(const WorkloadReport& w);
nlohmann::json ToJson(const Heartbeat& h);
nlohmann::json ToJson(const HeartbeatReply& r);

// Decoders: InvalidArgument naming the field ("heartbeat.workloads[2].epoch: must be an integer").
absl::StatusOr<Registration> RegistrationFromJson(const nlohmann::json& j);
absl::StatusOr<RegistrationReply> RegistrationReplyFromJson(const nlohmann::json& j);
absl::StatusOr<Assignment> AssignmentFromJson(const nlohmann::json& j, const std::string& path = "assignment");
absl::StatusOr<Heartbeat> HeartbeatFromJson(const nlohmann::json& j);
absl::StatusOr<HeartbeatReply> HeartbeatReplyFromJson(const nlohmann::json& j);

std::string_view WorkloadPhaseName(WorkloadPhase p);  // "running", "exited", "failed-to-start"

// A fresh agent instance id: 128 random bits from the OS (getrandom(2), /dev/urandom as fallback) as 32
// lower-case hex digits. Not from the seeded Rng: two agents started alike must never draw the same id.
// Errors: Internal when neither source gives 16 bytes.
absl::StatusOr<std::string> NewInstanceId();

}  // namespace gpugeek::api

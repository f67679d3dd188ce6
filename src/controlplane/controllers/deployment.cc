#include "controlplane/controllers/deployment.h"

#include <algorithm>
#include <cmath>
#include <thread>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "api/job_spec.h"
#include "common/absl_fmt.h"
#include "common/status_macros.h"
#include "controlplane/control_plane.h"
#include "http/client.h"

namespace gpugeek::controlplane {
namespace {

constexpr char kActive[] = "ACTIVE";
constexpr char kDeleted[] = "DELETED";
constexpr char kEnded[] = "ENDED";
constexpr int kEndedShown = 20;

// FNV-1a, 64 bits, as 16 hex digits: stable across builds and runs.
std::string Digest(const std::string& text) {
  uint64_t h = 14695981039346656037ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return fmt::format("{:016x}", h);
}

std::string VersionDigest(const api::ServiceVersion& v) { return Digest(api::JobSpecToYaml(v.run)); }

std::string ReplicaName(const std::string& service, const std::string& version, int64_t ordinal) {
  return fmt::format("{}-{}-{}", service, version, ordinal);
}

// The platform variables of a replica (api::kPlatformEnvNames).
std::map<std::string, std::string> ReplicaEnv(const std::string& service, const std::string& version, int port) {
  return {{"PORT", std::to_string(port)}, {"GPUGEEK_SERVICE", service}, {"GPUGEEK_SERVICE_VERSION", version}};
}

std::vector<std::pair<std::string, int>> Weights(const api::ServiceSpec& spec) {
  std::vector<std::pair<std::string, int>> out;
  for (const api::ServiceVersion& v : spec.versions) out.emplace_back(v.name, v.weight_percent);
  return out;
}

int Total(const std::map<std::string, int>& desired) {
  int total = 0;
  for (const auto& [v, n] : desired) total += n;
  return total;
}

std::string VersionList(const api::ServiceSpec& spec) {
  std::string out;
  for (const api::ServiceVersion& v : spec.versions) out += (out.empty() ? "" : ", ") + v.name;
  return out;
}

const api::ServiceVersion* FindVersion(const api::ServiceSpec& spec, const std::string& name) {
  for (const api::ServiceVersion& v : spec.versions) {
    if (v.name == name) return &v;
  }
  return nullptr;
}

int64_t CapacityMilli(const std::optional<Allocation>& a) {
  if (!a) return 1000;
  int64_t milli = 0;
  for (const AllocationMember& m : a->members) milli += m.gpu_milli * static_cast<int64_t>(m.gpus.size());
  return milli > 0 ? milli : 1000;
}

}  // namespace

std::map<std::string, int> SplitByWeight(int total, const std::vector<std::pair<std::string, int>>& weights) {
  std::map<std::string, int> out;
  for (const auto& [name, w] : weights) out[name] = 0;
  if (total <= 0 || weights.empty()) return out;
  int weight_sum = 0;
  for (const auto& [name, w] : weights) weight_sum += std::max(w, 0);
  if (weight_sum == 0) return out;
  // Largest remainder (Hamilton): floors first, then one each to the largest remainders (ties: spec order).
  std::vector<std::pair<int64_t, size_t>> remainders;  // (remainder x weight_sum, index)
  int given = 0;
  for (size_t i = 0; i < weights.size(); ++i) {
    const int64_t share = int64_t{total} * std::max(weights[i].second, 0);
    out[weights[i].first] = static_cast<int>(share / weight_sum);
    given += out[weights[i].first];
    remainders.emplace_back(share % weight_sum, i);
  }
  std::stable_sort(remainders.begin(), remainders.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  for (size_t k = 0; given < total && k < remainders.size(); ++k, ++given) out[weights[remainders[k].second].first]++;
  // Every version with weight > 0 gets at least one, taken from the largest counts; when there are fewer than
  // versions taking traffic, each still gets one (the total then exceeds the count asked for): a version's share of
  // the requests would otherwise wait in the gateway's activator for a replica that never comes.
  for (const auto& [name, w] : weights) {
    if (w <= 0 || out[name] > 0) continue;
    std::string largest;
    for (const auto& [other, ow] : weights) {
      if (out[other] > 1 && (largest.empty() || out[other] > out[largest])) largest = other;
    }
    if (!largest.empty()) out[largest]--;
    out[name]++;
  }
  return out;
}

std::string FormatDesired(const std::map<std::string, int>& desired) {
  std::string out;
  for (const auto& [v, n] : desired) out += fmt::format("{}{}={}", out.empty() ? "" : ",", v, n);
  return out;
}

std::map<std::string, int> ParseDesired(const std::string& text) {
  std::map<std::string, int> out;
  for (absl::string_view item : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    const size_t eq = item.find('=');
    int n = 0;
    if (eq == absl::string_view::npos || !absl::SimpleAtoi(item.substr(eq + 1), &n)) continue;
    out[std::string(item.substr(0, eq))] = n;
  }
  return out;
}

DeploymentController::DeploymentController(ControlPlane& control_plane, store::Store& store, Clock& clock,
                                           DeploymentOptions options)
    : cp_(control_plane), store_(store), clock_(clock), options_(options) {}

absl::StatusOr<api::ServiceSpec> DeploymentController::Parse(const std::string& yaml) const {
  return api::ParseServiceSpec(yaml,
                               cp_.options().catalog != nullptr ? *cp_.options().catalog : hw::GpuCatalog::Builtin());
}

std::string DeploymentController::NewId() {
  std::lock_guard<std::mutex> lock(id_mu_);
  if (next_id_ == 0) {
    next_id_ = 1;
    std::string after;
    for (;;) {
      absl::StatusOr<std::vector<store::ServiceRecord>> page = store_.ListServices({.after_id = after, .limit = 10000});
      if (!page.ok() || page->empty()) break;
      after = page->back().id;
      int64_t n = 0;
      if (after.size() > 2 && absl::SimpleAtoi(after.substr(2), &n)) next_id_ = std::max(next_id_, n + 1);
      if (page->size() < 10000) break;
    }
  }
  return fmt::format("s-{:06d}", next_id_++);
}

absl::StatusOr<store::ServiceRecord> DeploymentController::Find(const std::string& name) {
  ASSIGN_OR_RETURN(std::vector<store::ServiceRecord> found,
                   store_.ListServices({.name = name, .state = kActive, .limit = 10}));
  if (found.empty()) return absl::NotFoundError(fmt::format("no service '{}'", name));
  return found.front();
}

absl::StatusOr<store::ServiceRecord> DeploymentController::Mutate(
    const std::string& id, const std::function<absl::Status(store::ServiceRecord&)>& change) {
  for (int attempt = 0;; ++attempt) {
    ASSIGN_OR_RETURN(store::ServiceRecord record, store_.GetService(id));
    if (record.state != kActive) return absl::NotFoundError(fmt::format("no service '{}'", record.name));
    RETURN_IF_ERROR(change(record));
    absl::StatusOr<store::ServiceRecord> stored = store_.UpdateService(record);
    if (stored.status().code() == absl::StatusCode::kAborted && attempt < 8) continue;
    if (stored.ok()) Wake();
    return stored;
  }
}

absl::StatusOr<store::ServiceRecord> DeploymentController::Apply(const std::string& spec_yaml,
                                                                 const std::string& tenant, const std::string& user) {
  ASSIGN_OR_RETURN(const api::ServiceSpec spec, Parse(spec_yaml));
  // One Apply at a time: two of the same new name must not both create it.
  std::lock_guard<std::mutex> apply_lock(apply_mu_);
  absl::StatusOr<store::ServiceRecord> existing = Find(spec.name);
  if (existing.ok()) {
    if (existing->tenant != tenant) {
      return absl::AlreadyExistsError(
          fmt::format("name: another tenant's service is named '{}'; choose another name", spec.name));
    }
    return Mutate(existing->id, [&](store::ServiceRecord& r) -> absl::Status {
      absl::StatusOr<api::ServiceSpec> old = Parse(r.spec_yaml);
      if (old.ok() && api::ServiceSpecToYaml(*old) == api::ServiceSpecToYaml(spec)) return absl::OkStatus();
      const int total = Total(ParseDesired(r.desired));
      r.desired = FormatDesired(SplitByWeight(total, Weights(spec)));
      r.spec_yaml = spec_yaml;
      r.user = user;
      r.generation++;
      r.reason = fmt::format("spec updated by {} (generation {})", user.empty() ? "the server" : user, r.generation);
      return absl::OkStatus();
    });
  }
  if (existing.status().code() != absl::StatusCode::kNotFound) return existing.status();
  store::ServiceRecord record{.id = NewId(),
                              .tenant = tenant,
                              .user = user,
                              .name = spec.name,
                              .spec_yaml = spec_yaml,
                              .generation = 1,
                              .desired = FormatDesired(SplitByWeight(spec.replicas.initial, Weights(spec))),
                              .state = kActive,
                              .reason = fmt::format("submitted by {}", user.empty() ? "the server" : user)};
  ASSIGN_OR_RETURN(store::ServiceRecord stored, store_.CreateService(record));
  Wake();
  return stored;
}

absl::StatusOr<store::ServiceRecord> DeploymentController::Delete(const std::string& id, const std::string& reason) {
  return Mutate(id, [&](store::ServiceRecord& r) {
    r.state = kDeleted;
    r.reason = reason;
    return absl::OkStatus();
  });
}

absl::StatusOr<std::map<std::string, int>> DeploymentController::SetTraffic(const std::string& id,
                                                                            const nlohmann::json& weights) {
  std::map<std::string, int> out;
  RETURN_IF_ERROR(Mutate(id, [&](store::ServiceRecord& r) -> absl::Status {
                    ASSIGN_OR_RETURN(api::ServiceSpec spec, Parse(r.spec_yaml));
                    if (!weights.is_object() || weights.empty()) {
                      return absl::InvalidArgumentError(
                          "weights: give each version's weight in percent, e.g. {\"v1\": 90, \"v2\": 10}");
                    }
                    int sum = 0;
                    for (const auto& [name, value] : weights.items()) {
                      if (FindVersion(spec, name) == nullptr) {
                        return absl::InvalidArgumentError(
                            fmt::format("weights.{}: no such version; the versions are {}", name, VersionList(spec)));
                      }
                      if (!value.is_number_integer() || value.get<int64_t>() < 0 || value.get<int64_t>() > 100) {
                        return absl::InvalidArgumentError(
                            fmt::format("weights.{}: {} is not a whole percent 0..100", name, value.dump()));
                      }
                      sum += value.get<int>();
                    }
                    if (sum != 100) {
                      return absl::InvalidArgumentError(fmt::format("weights: sum to {}; they must sum to 100", sum));
                    }
                    out.clear();
                    for (api::ServiceVersion& v : spec.versions) {
                      v.weight_percent = weights.contains(v.name) ? weights[v.name].get<int>() : 0;
                      out[v.name] = v.weight_percent;
                    }
                    r.spec_yaml = api::ServiceSpecToYaml(spec);
                    r.desired = FormatDesired(SplitByWeight(Total(ParseDesired(r.desired)), Weights(spec)));
                    r.generation++;
                    r.reason = fmt::format("traffic set to {} (generation {})", FormatDesired(out), r.generation);
                    return absl::OkStatus();
                  }).status());
  return out;
}

absl::StatusOr<std::map<std::string, int>> DeploymentController::Scale(const std::string& id,
                                                                       const nlohmann::json& replicas,
                                                                       const std::string& reason) {
  std::map<std::string, int> out;
  RETURN_IF_ERROR(
      Mutate(id, [&](store::ServiceRecord& r) -> absl::Status {
        ASSIGN_OR_RETURN(const api::ServiceSpec spec, Parse(r.spec_yaml));
        if (!replicas.is_object() || replicas.empty()) {
          return absl::InvalidArgumentError("replicas: give the replicas of each version to set, e.g. {\"v1\": 2}");
        }
        std::map<std::string, int> desired = ParseDesired(r.desired);
        for (const auto& [name, value] : replicas.items()) {
          if (FindVersion(spec, name) == nullptr) {
            return absl::InvalidArgumentError(
                fmt::format("replicas.{}: no such version; the versions are {}", name, VersionList(spec)));
          }
          if (!value.is_number_integer() || value.get<int64_t>() < 0 || value.get<int64_t>() > spec.replicas.max) {
            return absl::InvalidArgumentError(
                fmt::format("replicas.{}: {} is not a count 0..{}", name, value.dump(), spec.replicas.max));
          }
          desired[name] = value.get<int>();
        }
        out.clear();
        for (const api::ServiceVersion& v : spec.versions) out[v.name] = desired[v.name];
        const int total = Total(out);
        if (total < spec.replicas.min || total > spec.replicas.max) {
          return absl::InvalidArgumentError(
              fmt::format("replicas: {} in all; the spec allows {}..{} (replicas.min, replicas.max)", total,
                          spec.replicas.min, spec.replicas.max));
        }
        r.desired = FormatDesired(out);
        r.reason = reason;
        return absl::OkStatus();
      }).status());
  return out;
}

void DeploymentController::ReportLoad(const std::string& gateway,
                                      const std::map<std::string, std::pair<double, double>>& load,
                                      const std::map<std::string, std::map<std::string, uint64_t>>& served) {
  std::lock_guard<std::mutex> lock(mu_);
  gateways_[gateway] = {.at = clock_.Monotonic(), .load = load, .served = served};
}

std::map<std::string, uint64_t> DeploymentController::Served(const std::string& service_name) {
  std::lock_guard<std::mutex> lock(mu_);
  std::map<std::string, uint64_t> out;
  for (const auto& [id, g] : gateways_) {
    auto it = g.served.find(service_name);
    if (it == g.served.end()) continue;
    for (const auto& [version, n] : it->second) out[version] += n;
  }
  return out;
}

double DeploymentController::Load(const std::string& service_name) {
  const MonoTime now = clock_.Monotonic();
  std::lock_guard<std::mutex> lock(mu_);
  double sum = 0;
  for (const auto& [id, g] : gateways_) {
    if (now - g.at > options_.load_window) continue;
    auto it = g.load.find(service_name);
    if (it != g.load.end()) sum += std::max(it->second.first, 0.0) + std::max(it->second.second, 0.0);
  }
  return sum;
}

bool DeploymentController::Ready(const std::string& job_id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = probes_.find(job_id);
  return it != probes_.end() && it->second.ready;
}

void DeploymentController::Wake() {
  {
    std::lock_guard<std::mutex> lock(wake_mu_);
    work_ = true;
  }
  wake_cv_.notify_all();
}

void DeploymentController::WaitForWork(Duration timeout) {
  std::unique_lock<std::mutex> lock(wake_mu_);
  wake_cv_.wait_for(lock, timeout, [this] { return work_; });
  work_ = false;
}

absl::Status DeploymentController::EndReplica(store::ReplicaRecord& replica, const std::string& reason, bool cancel) {
  store::ReplicaRecord next = replica;
  next.state = kEnded;
  next.reason = reason;
  RETURN_IF_ERROR(store_.PutReplica(next));  // durable before the job is stopped
  replica = next;
  {
    std::lock_guard<std::mutex> lock(mu_);
    probes_.erase(replica.job_id);
  }
  if (!replica.job_id.empty()) draining_[replica.job_id] = replica.port;  // until its allocation is released
  spdlog::info("services: {} replica {}-{} ({}) ended: {}", replica.service_id, replica.version_name, replica.ordinal,
               replica.job_id, reason);
  if (cancel && !replica.job_id.empty()) {
    absl::StatusOr<JobView> cancelled = cp_.Cancel(replica.job_id, reason);
    if (!cancelled.ok() && cancelled.status().code() != absl::StatusCode::kFailedPrecondition &&
        cancelled.status().code() != absl::StatusCode::kNotFound) {
      spdlog::warn("services: cannot cancel job {}: {}", replica.job_id, cancelled.status());
    }
  }
  return absl::OkStatus();
}

absl::Status DeploymentController::Launch(const store::ServiceRecord& service, const api::ServiceSpec& spec,
                                          const api::ServiceVersion& version, const std::string& digest,
                                          int64_t& next_ordinal, std::set<int>& ports_in_use) {
  int port = 0;
  for (int p = options_.first_port; p <= options_.last_port; ++p) {
    if (!ports_in_use.contains(p)) {
      port = p;
      break;
    }
  }
  if (port == 0) {
    return absl::ResourceExhaustedError(
        fmt::format("no free replica port in {}..{}", options_.first_port, options_.last_port));
  }
  ports_in_use.insert(port);
  const int64_t ordinal = next_ordinal++;
  store::ReplicaRecord replica{.service_id = service.id,
                               .version_name = version.name,
                               .ordinal = ordinal,
                               .port = port,
                               .spec_digest = digest,
                               .state = kActive};
  RETURN_IF_ERROR(store_.PutReplica(replica));
  api::JobSpec job = version.run;
  job.name = ReplicaName(spec.name, version.name, ordinal);
  std::map<std::string, std::string> env = ReplicaEnv(spec.name, version.name, port);
  absl::StatusOr<JobView> submitted = cp_.Submit({.spec_yaml = api::JobSpecToYaml(job),
                                                  .tenant = service.tenant,
                                                  .user = service.user,
                                                  .platform_env = std::move(env)});
  if (!submitted.ok()) {
    // The row ends with the reason; the version backs off as after a failure.
    RETURN_IF_ERROR(EndReplica(replica, fmt::format("refused: {}", submitted.status().message()), false));
    return submitted.status();
  }
  replica.job_id = submitted->record.id;
  spdlog::info("services: {} replica {} is job {} (port {})", service.name, job.name, replica.job_id, port);
  return store_.PutReplica(replica);
}

void DeploymentController::Reconcile() {
  // Every ACTIVE service, and those deleted since the last pass (their replicas are cancelled).
  std::vector<store::ServiceRecord> services;
  std::string after;
  for (;;) {
    absl::StatusOr<std::vector<store::ServiceRecord>> page =
        store_.ListServices({.state = kActive, .after_id = after, .limit = 1000});
    if (!page.ok()) {
      spdlog::warn("services: cannot list services: {}", page.status());
      return;
    }
    for (store::ServiceRecord& s : *page) services.push_back(std::move(s));
    if (page->size() < 1000 || services.size() >= kMaxServices) break;
    after = services.back().id;
  }
  std::set<std::string> active_ids;
  for (const store::ServiceRecord& s : services) active_ids.insert(s.id);
  // Deleted services: the first pass looks at every one; later passes at those seen active before.
  std::vector<std::string> to_clean;
  if (!scanned_deleted_) {
    absl::StatusOr<std::vector<store::ServiceRecord>> deleted =
        store_.ListServices({.state = kDeleted, .limit = kMaxServices});
    if (deleted.ok()) {
      for (const store::ServiceRecord& s : *deleted) to_clean.push_back(s.id);
      scanned_deleted_ = true;
    }
  }
  for (const std::string& id : known_) {
    if (!active_ids.contains(id)) to_clean.push_back(id);
  }
  for (const std::string& id : to_clean) {
    absl::StatusOr<std::vector<store::ReplicaRecord>> alive = store_.ListReplicas(id, /*active_only=*/true);
    if (!alive.ok()) continue;
    for (store::ReplicaRecord& r : *alive) (void)EndReplica(r, "service deleted", /*cancel=*/true);
    autoscalers_.erase(id);
  }
  known_ = active_ids;

  // Ports of every live replica, and of ended ones whose job still holds its allocation (its server may still
  // be listening), so a new one gets a port no other replica of the cluster holds.
  std::set<int> ports_in_use;
  std::map<std::string, std::vector<store::ReplicaRecord>> replicas;
  const TimePoint recent = clock_.Now() - std::chrono::minutes(10);
  for (const store::ServiceRecord& s : services) {
    // The first sight of a service reads every row (the next ordinals, recently ended jobs); then live ones.
    const bool first = !next_ordinal_.contains(s.id);
    absl::StatusOr<std::vector<store::ReplicaRecord>> rows = store_.ListReplicas(s.id, /*active_only=*/!first);
    if (!rows.ok()) {
      spdlog::warn("services: {}: {}", s.name, rows.status());
      continue;
    }
    std::map<std::string, int64_t>& next = next_ordinal_[s.id];
    std::vector<store::ReplicaRecord> alive;
    for (store::ReplicaRecord& r : *rows) {
      next[r.version_name] = std::max(next[r.version_name], r.ordinal + 1);
      if (r.state != kEnded) {
        ports_in_use.insert(r.port);
        alive.push_back(std::move(r));
      } else if (!r.job_id.empty() && r.updated_at >= recent) {
        draining_[r.job_id] = r.port;
      }
    }
    replicas[s.id] = std::move(alive);
  }
  for (auto it = draining_.begin(); it != draining_.end();) {
    absl::StatusOr<JobView> job = cp_.GetJob(it->first);
    if (!job.ok() || !job->allocation || job->allocation->released) {
      it = draining_.erase(it);
    } else {
      ports_in_use.insert(it->second);
      ++it;
    }
  }
  std::erase_if(next_ordinal_, [&](const auto& e) { return !active_ids.contains(e.first); });
  for (const store::ServiceRecord& s : services) {
    auto it = replicas.find(s.id);
    if (it == replicas.end()) continue;
    if (absl::Status st = ReconcileOne(s, it->second, ports_in_use); !st.ok()) {
      spdlog::warn("services: {}: {}", s.name, st);
    }
  }
}

absl::Status DeploymentController::ReconcileOne(const store::ServiceRecord& service,
                                                std::vector<store::ReplicaRecord>& all, std::set<int>& ports_in_use) {
  absl::StatusOr<api::ServiceSpec> parsed = Parse(service.spec_yaml);
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(fmt::format("its stored spec no longer parses: {}", parsed.status().message()));
  }
  const api::ServiceSpec& spec = *parsed;
  const MonoTime now = clock_.Monotonic();
  const Duration budget = spec.startup_budget.value_or(options_.default_startup_budget);
  auto fail_version = [&](const std::string& version) {
    VersionBackoff& b = backoff_[service.id + "/" + version];
    b.failures++;
    Duration delay = options_.min_backoff;
    for (int i = 1; i < b.failures && delay < options_.max_backoff; ++i) delay *= 2;
    b.not_before = now + std::min(delay, options_.max_backoff);
  };

  // 1. What each live replica's job is doing.
  std::map<std::string, int64_t>& next_ordinal = next_ordinal_[service.id];
  int ready_total = 0;
  for (store::ReplicaRecord& r : all) {
    if (r.state == kEnded) continue;
    if (r.job_id.empty()) {
      // A crash between the row and the job's submission: adopt the job if it was stored, else end the row
      // (a new replica is started below).
      const std::string name = ReplicaName(spec.name, r.version_name, r.ordinal);
      absl::StatusOr<std::vector<JobView>> same = cp_.ListJobs({.tenant = service.tenant, .name = name});
      const std::map<std::string, std::string> env = ReplicaEnv(spec.name, r.version_name, r.port);
      if (same.ok()) {
        for (const JobView& v : *same) {
          if (v.record.platform_env == env) r.job_id = v.record.id;
        }
      }
      if (!r.job_id.empty()) {
        RETURN_IF_ERROR(store_.PutReplica(r));
      } else {
        RETURN_IF_ERROR(EndReplica(r, "its job was never submitted", false));
        continue;
      }
    }
    absl::StatusOr<JobView> job = cp_.GetJob(r.job_id);
    if (!job.ok()) {
      if (job.status().code() != absl::StatusCode::kNotFound) return job.status();
      RETURN_IF_ERROR(EndReplica(r, fmt::format("job {} is gone", r.job_id), false));
      fail_version(r.version_name);
      continue;
    }
    if (api::IsTerminal(job->record.state)) {
      RETURN_IF_ERROR(EndReplica(
          r, fmt::format("job {} {}: {}", r.job_id, api::JobStateName(job->record.state), job->record.reason), false));
      fail_version(r.version_name);
      continue;
    }
    if (job->record.state != api::JobState::kRunning || !job->allocation || job->allocation->members.empty()) {
      std::lock_guard<std::mutex> lock(mu_);
      probes_.erase(r.job_id);  // requeued: probed afresh once it runs again
      continue;
    }
    std::string address;
    if (absl::StatusOr<NodeView> node = cp_.Node(job->allocation->members[0].node); node.ok()) {
      address = node->registration.address;
    }
    const std::string url_base = fmt::format("http://{}:{}", address, r.port);
    bool ready = false;
    bool over_budget = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = probes_.find(r.job_id);
      if (it == probes_.end() || it->second.url_base != url_base) {
        ProbeState p{.url_base = url_base,
                     .probe = spec.readiness,
                     .started = now,
                     .next_probe = now + spec.readiness.initial_delay,
                     .since = clock_.Now()};
        it = probes_.insert_or_assign(r.job_id, std::move(p)).first;
      }
      it->second.probe = spec.readiness;
      ready = it->second.ready;
      over_budget = !it->second.ever_ready && now - it->second.started > budget;
    }
    if (over_budget) {
      RETURN_IF_ERROR(EndReplica(r,
                                 fmt::format("not ready within its startup budget ({}s); restarted",
                                             std::chrono::duration_cast<std::chrono::seconds>(budget).count()),
                                 /*cancel=*/true));
      fail_version(r.version_name);
      continue;
    }
    if (ready) {
      backoff_.erase(service.id + "/" + r.version_name);
      ++ready_total;
    }
  }

  // 2. Autoscaling (a pass a second when gateways report the service's load).
  store::ServiceRecord current = service;
  if (absl::Status s = Autoscale(current, spec, ready_total); !s.ok()) {
    spdlog::warn("services: {}: autoscaler: {}", service.name, s);
  }
  const std::map<std::string, int> desired = ParseDesired(current.desired);

  // 3. Per version: start what is missing, cancel what is too many or replaced.
  for (const api::ServiceVersion& version : spec.versions) {
    const std::string digest = VersionDigest(version);
    const auto want_it = desired.find(version.name);
    const int want = want_it == desired.end() ? 0 : want_it->second;
    std::vector<store::ReplicaRecord*> cur, old;
    for (store::ReplicaRecord& r : all) {
      if (r.state == kEnded || r.version_name != version.name) continue;
      (r.spec_digest == digest ? cur : old).push_back(&r);
    }
    const VersionBackoff& b = backoff_[service.id + "/" + version.name];
    while (static_cast<int>(cur.size()) < want && now >= b.not_before) {
      absl::Status launched = Launch(service, spec, version, digest, next_ordinal[version.name], ports_in_use);
      if (!launched.ok()) {
        // No free port: tried again next pass. A refused or failed submission backs the version off.
        if (launched.code() != absl::StatusCode::kResourceExhausted) fail_version(version.name);
        return launched;
      }
      absl::StatusOr<std::vector<store::ReplicaRecord>> reread = store_.ListReplicas(service.id, /*active_only=*/true);
      if (!reread.ok()) return reread.status();
      all = *std::move(reread);
      cur.clear();
      old.clear();
      for (store::ReplicaRecord& r : all) {
        if (r.state == kEnded || r.version_name != version.name) continue;
        (r.spec_digest == digest ? cur : old).push_back(&r);
      }
    }
    // Too many current ones: the highest ordinals go.
    while (static_cast<int>(cur.size()) > want) {
      RETURN_IF_ERROR(EndReplica(*cur.back(), "scaled down", /*cancel=*/true));
      cur.pop_back();
    }
    // Rolling update: an old replica stays while the new ones ready are fewer than wanted.
    int ready_cur = 0;
    for (const store::ReplicaRecord* r : cur) ready_cur += Ready(r->job_id) ? 1 : 0;
    const int keep_old = std::max(0, want - ready_cur);
    while (static_cast<int>(old.size()) > keep_old) {
      RETURN_IF_ERROR(EndReplica(*old.back(), fmt::format("replaced by generation {}", service.generation),
                                 /*cancel=*/true));
      old.pop_back();
    }
  }
  // Replicas of versions the spec no longer has.
  for (store::ReplicaRecord& r : all) {
    if (r.state != kEnded && FindVersion(spec, r.version_name) == nullptr) {
      RETURN_IF_ERROR(EndReplica(r, fmt::format("version {} removed", r.version_name), /*cancel=*/true));
    }
  }
  return absl::OkStatus();
}

absl::Status DeploymentController::Autoscale(store::ServiceRecord& service, const api::ServiceSpec& spec, int ready) {
  bool reported = false;
  const MonoTime now = clock_.Monotonic();
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [id, g] : gateways_) {
      reported = reported || (now - g.at <= options_.load_window && g.load.contains(spec.name));
    }
  }
  // Without a gateway reporting this service's load, the desired counts stay as set (initial, scale).
  if (!reported) return absl::OkStatus();
  Autoscaled& a = autoscalers_[service.id];
  if (a.autoscaler == nullptr || a.spec_yaml != service.spec_yaml) {
    sched::AutoscalerSpec as;
    as.target = {spec.autoscaling.target_concurrency, spec.autoscaling.target_queue_depth,
                 spec.autoscaling.target_tokens_in_flight, spec.autoscaling.target_kv_cache_use};
    as.stable_window = spec.autoscaling.stable_window;
    as.panic_window_percentage = spec.autoscaling.panic_window_percentage;
    as.panic_threshold = spec.autoscaling.panic_threshold;
    as.max_scale_up_rate = spec.autoscaling.max_scale_up_rate;
    as.max_scale_down_rate = spec.autoscaling.max_scale_down_rate;
    as.scale_to_zero_grace = spec.autoscaling.scale_to_zero_grace;
    as.min_replicas = spec.replicas.min;
    as.max_replicas = spec.replicas.max;
    RETURN_IF_ERROR(sched::ValidateAutoscalerSpec(as));
    a.autoscaler = std::make_unique<sched::Autoscaler>(as);
    a.spec_yaml = service.spec_yaml;
    a.last = MonoTime{};
    a.decided = -1;
  }
  if (a.last != MonoTime{} && now - a.last < std::chrono::seconds(1)) return absl::OkStatus();
  a.last = now;
  sched::ScaleSample sample{.at = now};
  sample.value[static_cast<size_t>(sched::ScaleSignal::kConcurrency)] = Load(spec.name);
  a.autoscaler->Record(sample);
  const std::map<std::string, int> desired = ParseDesired(service.desired);
  // The autoscaler counts the replicas it chose, not the one more per version the split adds when its count
  // is below the versions taking traffic: else 2 versions at 1 chosen replica run 2, and the scale-down rate
  // (at most half the ready replicas per decision) would never let it reach 0. A count set by someone else
  // (POST .../scale, a new spec) is taken as it stands.
  const bool own = a.decided >= 0 && a.decided_split == service.desired;
  const int current = own ? a.decided : Total(desired);
  const sched::ScaleDecision decision = a.autoscaler->Decide(now, std::min(ready, current), current);
  const int total = std::clamp(decision.desired, spec.replicas.min, spec.replicas.max);
  a.decided = total;
  a.decided_split = FormatDesired(SplitByWeight(total, Weights(spec)));
  // (Compared as split: a version taking traffic has one even when the count is below the versions.)
  if (a.decided_split == FormatDesired(desired)) return absl::OkStatus();
  const std::string reason = fmt::format("autoscaler: {} -> {} replicas: {}", current, total, decision.reason);
  store::ServiceRecord next = service;
  next.desired = a.decided_split;
  next.reason = reason;
  absl::StatusOr<store::ServiceRecord> stored = store_.UpdateService(next);
  if (!stored.ok()) return stored.status();  // moved meanwhile: decided again next second
  spdlog::info("services: {}: {}", spec.name, reason);
  service = *std::move(stored);
  return absl::OkStatus();
}

void DeploymentController::Probe() {
  std::vector<DueProbe> due;
  const MonoTime now = clock_.Monotonic();
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [job, p] : probes_) {
      if (p.in_flight || now < p.next_probe) continue;
      p.in_flight = true;
      due.push_back({.job = job, .url_base = p.url_base, .probe = p.probe});
    }
  }
  // Up to kParallelProbes at once, so a replica that never answers delays the others by one timeout at most.
  for (size_t first = 0; first < due.size(); first += kParallelProbes) {
    const size_t end = std::min(due.size(), first + kParallelProbes);
    if (end - first == 1) {
      ProbeOne(due[first]);
      continue;
    }
    std::vector<std::thread> batch;
    for (size_t i = first; i < end; ++i) batch.emplace_back([this, &d = due[i]] { ProbeOne(d); });
    for (std::thread& t : batch) t.join();
  }
}

void DeploymentController::ProbeOne(const DueProbe& d) {
  bool ok = false;
  absl::StatusOr<std::unique_ptr<http::Client>> client = http::Client::Create(
      {.base_url = d.url_base, .connect_timeout = d.probe.timeout, .read_timeout = d.probe.timeout});
  if (client.ok()) {
    absl::StatusOr<http::Client::Reply> reply = (*client)->Send("GET", d.probe.path);
    ok = reply.ok() && reply->status >= 200 && reply->status < 400;
  }
  bool changed = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = probes_.find(d.job);
    if (it == probes_.end() || it->second.url_base != d.url_base) return;  // ended or moved meanwhile
    ProbeState& p = it->second;
    p.in_flight = false;
    p.next_probe = clock_.Monotonic() + p.probe.period;
    if (ok) {
      p.successes++;
      p.failures = 0;
      if (!p.ready && p.successes >= p.probe.success_threshold) {
        p.ready = p.ever_ready = changed = true;
        p.since = clock_.Now();
      }
    } else {
      p.failures++;
      p.successes = 0;
      if (p.ready && p.failures >= p.probe.failure_threshold) {
        p.ready = false;
        changed = true;
        p.since = clock_.Now();
      }
    }
  }
  if (changed) {
    spdlog::info("services: replica job {} is {}", d.job, ok ? "READY" : "NOT_READY");
    Wake();  // a rolling update may go on
  }
}

absl::StatusOr<std::vector<ReplicaView>> DeploymentController::Replicas(const store::ServiceRecord& service,
                                                                        bool live_only) {
  ASSIGN_OR_RETURN(std::vector<store::ReplicaRecord> all, store_.ListReplicas(service.id, live_only));
  // The live ones, then the last kEndedShown ended (by when they ended).
  std::vector<const store::ReplicaRecord*> rows, ended_rows;
  for (const store::ReplicaRecord& r : all) (r.state == kEnded ? ended_rows : rows).push_back(&r);
  std::stable_sort(
      ended_rows.begin(), ended_rows.end(),
      [](const store::ReplicaRecord* a, const store::ReplicaRecord* b) { return a->updated_at < b->updated_at; });
  const size_t skip = ended_rows.size() > kEndedShown ? ended_rows.size() - kEndedShown : 0;
  rows.insert(rows.end(), ended_rows.begin() + static_cast<std::ptrdiff_t>(skip), ended_rows.end());
  std::vector<ReplicaView> out;
  for (const store::ReplicaRecord* row : rows) {
    const store::ReplicaRecord& r = *row;
    ReplicaView v{.version = r.version_name,
                  .ordinal = r.ordinal,
                  .job = r.job_id,
                  .port = r.port,
                  .state = kEnded,
                  .since = r.updated_at};
    std::optional<JobView> job;
    if (!r.job_id.empty()) {
      if (absl::StatusOr<JobView> j = cp_.GetJob(r.job_id); j.ok()) job = *std::move(j);
    }
    if (job && job->allocation && !job->allocation->members.empty()) {
      v.node = job->allocation->members[0].node;
      if (absl::StatusOr<NodeView> node = cp_.Node(v.node); node.ok()) v.address = node->registration.address;
      v.capacity_milli = CapacityMilli(job->allocation);
    }
    if (r.state == kEnded || (job && api::IsTerminal(job->record.state))) {
      out.push_back(std::move(v));
      continue;
    }
    if (!job || job->record.state == api::JobState::kPending) {
      v.state = "PENDING";
      if (job) v.since = job->record.updated_at;
    } else {
      v.state = "STARTING";
      std::lock_guard<std::mutex> lock(mu_);
      if (auto it = probes_.find(r.job_id); it != probes_.end()) {
        v.since = it->second.since;
        if (it->second.ready) {
          v.state = "READY";
        } else if (it->second.ever_ready) {
          v.state = "NOT_READY";
        }
      } else {
        v.since = job->record.updated_at;
      }
    }
    out.push_back(std::move(v));
  }
  return out;
}

absl::StatusOr<nlohmann::json> DeploymentController::Routes() {
  nlohmann::json routes = nlohmann::json::array();
  std::string after;
  for (;;) {
    ASSIGN_OR_RETURN(std::vector<store::ServiceRecord> page,
                     store_.ListServices({.state = kActive, .after_id = after, .limit = 1000}));
    for (const store::ServiceRecord& s : page) {
      absl::StatusOr<api::ServiceSpec> spec = Parse(s.spec_yaml);
      if (!spec.ok()) continue;
      ASSIGN_OR_RETURN(const std::vector<ReplicaView> replicas, Replicas(s, /*live_only=*/true));
      nlohmann::json route = {{"service", s.name}, {"hosts", {s.name}}, {"path_prefix", "/"}};
      if (spec->traffic.sticky) {
        route["sticky"] = {{std::string(api::StickyKeyName(spec->traffic.sticky->key)), spec->traffic.sticky->name}};
      }
      route["retries"] = std::min(spec->traffic.retries, 5);  // the gateway's bound
      if (spec->traffic.auth_token) route["auth"] = {{"tenant", s.tenant}};
      route["activator"] = {
          {"queue", spec->traffic.activator.queue},
          {"timeout_ms",
           std::chrono::duration_cast<std::chrono::milliseconds>(spec->traffic.activator.timeout).count()}};
      nlohmann::json versions = nlohmann::json::array();
      for (const api::ServiceVersion& v : spec->versions) {
        nlohmann::json ready = nlohmann::json::array();
        for (const ReplicaView& r : replicas) {
          if (r.version != v.name || r.state != "READY") continue;
          ready.push_back({{"id", r.job},
                           {"address", fmt::format("{}:{}", r.address, r.port)},
                           {"capacity_milli", r.capacity_milli}});
        }
        versions.push_back({{"name", v.name}, {"weight", v.weight_percent}, {"replicas", std::move(ready)}});
      }
      route["versions"] = std::move(versions);
      routes.push_back(std::move(route));
    }
    if (page.size() < 1000) break;
    after = page.back().id;
  }
  return nlohmann::json{{"routes", std::move(routes)}};
}

}  // namespace gpugeek::controlplane

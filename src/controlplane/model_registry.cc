#include "controlplane/model_registry.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/file.h"
#include "common/json_parse.h"
#include "common/status_macros.h"

namespace gpugeek::controlplane {
namespace {

namespace fs = std::filesystem;
using J = nlohmann::json;

constexpr std::pair<ModelRight, const char*> kRightNames[] = {
    {kModelPull, "pull"}, {kModelDeploy, "deploy"}, {kModelFinetune, "finetune"}};
constexpr uint64_t kMaxGrantsFileBytes = 64 << 20;
constexpr size_t kMaxPullLine = 4096;

// The default tenant is "" in some callers and "default" in others: one name on disk and in the maps.
std::string Tenant(const std::string& t) { return t.empty() ? "default" : t; }

J PullJson(const PullRecord& p) {
  return {{"seq", p.seq},       {"time", p.time_unix_s}, {"user", p.user},
          {"tenant", p.tenant}, {"model", p.model},      {"commit", p.commit}};
}

}  // namespace

absl::StatusOr<ModelRights> ParseModelRights(const std::vector<std::string>& names) {
  ModelRights rights = 0;
  for (const std::string& name : names) {
    bool known = false;
    for (const auto& [bit, text] : kRightNames) {
      if (name == text) {
        rights |= bit;
        known = true;
      }
    }
    if (!known) {
      return absl::InvalidArgumentError(
          fmt::format("rights: unknown right '{}'; the rights are pull, deploy and finetune", name.substr(0, 64)));
    }
  }
  return rights;
}

std::vector<std::string> ModelRightNames(ModelRights rights) {
  std::vector<std::string> names;
  for (const auto& [bit, text] : kRightNames) {
    if (rights & bit) names.emplace_back(text);
  }
  return names;
}

std::string ModelRegistry::OwnerDir(const std::string& owner) const { return dir_ + "/" + Tenant(owner); }

absl::StatusOr<std::unique_ptr<ModelRegistry>> ModelRegistry::Open(const std::string& dir, const Clock& clock) {
  if (dir.empty()) return absl::InvalidArgumentError("model registry: dir is required");
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return absl::UnavailableError(fmt::format("model registry: cannot create {}: {}", dir, ec.message()));
  fs::permissions(dir, fs::perms::owner_all, ec);
  std::unique_ptr<ModelRegistry> registry(new ModelRegistry(dir, clock));
  RETURN_IF_ERROR(registry->Load());
  return registry;
}

absl::Status ModelRegistry::Load() {
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(dir_, ec)) {
    if (!e.is_directory()) continue;
    const std::string owner = e.path().filename().string();
    const std::string grants_path = (e.path() / "grants.json").string();
    if (fs::exists(grants_path)) {
      ASSIGN_OR_RETURN(std::string text, ReadFileBounded(grants_path, kMaxGrantsFileBytes, "model grants"));
      absl::StatusOr<J> j = ParseJsonBounded(text);
      if (!j.ok() || !j->is_object() || !(*j)["models"].is_object()) {
        return absl::DataLossError(fmt::format("model registry: {} is not a grants file", grants_path));
      }
      MutexLock lock(&mu_);
      for (const auto& [model, grantees] : (*j)["models"].items()) {
        if (!grantees.is_object()) continue;
        for (const auto& [grantee, names] : grantees.items()) {
          std::vector<std::string> list;
          for (const J& n : names) {
            if (n.is_string()) list.push_back(n.get<std::string>());
          }
          absl::StatusOr<ModelRights> rights = ParseModelRights(list);
          if (rights.ok() && *rights != 0) grants_[{owner, model, grantee}] = *rights;
        }
      }
    }
    // The last sequence number of the pull log: its line count (each line is one record).
    std::ifstream log(e.path() / "pulls.jsonl");
    int64_t lines = 0;
    for (std::string line; std::getline(log, line);) ++lines;
    MutexLock lock(&mu_);
    last_pull_seq_[owner] = lines;
  }
  if (ec) return absl::UnavailableError(fmt::format("model registry: cannot read {}: {}", dir_, ec.message()));
  return absl::OkStatus();
}

ModelRights ModelRegistry::RightsOf(const std::string& owner, const std::string& model,
                                    const std::string& tenant) const {
  if (Tenant(owner) == Tenant(tenant)) return kAllModelRights;
  MutexLock lock(&mu_);
  auto it = grants_.find({Tenant(owner), model, Tenant(tenant)});
  return it == grants_.end() ? 0 : it->second;
}

absl::Status ModelRegistry::SetGrant(const std::string& owner_in, const std::string& model,
                                     const std::string& grantee_in, ModelRights rights) {
  const std::string owner = Tenant(owner_in), grantee = Tenant(grantee_in);
  if (owner == grantee) {
    return absl::InvalidArgumentError("tenant: your own tenant has every right on its models; name another tenant");
  }
  MutexLock write(&write_mu_);
  {
    MutexLock lock(&mu_);
    size_t count = 0;
    for (auto it = grants_.lower_bound({owner, model, ""});
         it != grants_.end() && std::get<0>(it->first) == owner && std::get<1>(it->first) == model; ++it) {
      ++count;
    }
    if (rights != 0 && count >= kMaxGrantsPerModel && !grants_.contains({owner, model, grantee})) {
      return absl::ResourceExhaustedError(
          fmt::format("model {} is shared with {} tenants already, the most one model may be", model, count));
    }
    if (rights == 0) {
      grants_.erase({owner, model, grantee});
    } else {
      grants_[{owner, model, grantee}] = rights;
    }
  }
  return WriteGrants(owner);
}

absl::Status ModelRegistry::WriteGrants(const std::string& owner) {
  J models = J::object();
  {
    MutexLock lock(&mu_);
    for (auto it = grants_.lower_bound({owner, "", ""}); it != grants_.end() && std::get<0>(it->first) == owner; ++it) {
      models[std::get<1>(it->first)][std::get<2>(it->first)] = ModelRightNames(it->second);
    }
  }
  std::error_code ec;
  fs::create_directories(OwnerDir(owner), ec);
  if (ec)
    return absl::UnavailableError(fmt::format("model registry: cannot create {}: {}", OwnerDir(owner), ec.message()));
  return WriteFilePrivate(OwnerDir(owner) + "/grants.json", J{{"format", 1}, {"models", models}}.dump(1) + "\n");
}

std::vector<ModelGrant> ModelRegistry::GrantsOn(const std::string& owner_in, const std::string& model) const {
  const std::string owner = Tenant(owner_in);
  std::vector<ModelGrant> out;
  MutexLock lock(&mu_);
  for (auto it = grants_.lower_bound({owner, model, ""});
       it != grants_.end() && std::get<0>(it->first) == owner && std::get<1>(it->first) == model; ++it) {
    out.push_back({owner, model, std::get<2>(it->first), it->second});
  }
  return out;
}

std::vector<ModelGrant> ModelRegistry::GrantsTo(const std::string& tenant_in) const {
  const std::string tenant = Tenant(tenant_in);
  std::vector<ModelGrant> out;
  MutexLock lock(&mu_);
  for (const auto& [key, rights] : grants_) {
    if (std::get<2>(key) == tenant) out.push_back({std::get<0>(key), std::get<1>(key), tenant, rights});
  }
  return out;
}

absl::StatusOr<PullRecord> ModelRegistry::RecordPull(const std::string& owner_in, PullRecord record) {
  const std::string owner = Tenant(owner_in);
  record.tenant = Tenant(record.tenant);
  record.time_unix_s = std::chrono::duration_cast<std::chrono::seconds>(clock_.Now().time_since_epoch()).count();
  MutexLock write(&write_mu_);
  {
    MutexLock lock(&mu_);
    record.seq = last_pull_seq_[owner] + 1;
  }
  std::error_code ec;
  fs::create_directories(OwnerDir(owner), ec);
  const std::string path = OwnerDir(owner) + "/pulls.jsonl";
  const std::string line = PullJson(record).dump() + "\n";
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (fd < 0) return absl::UnavailableError(fmt::format("pull log {}: {}", path, std::strerror(errno)));
  const bool written = ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size()) && ::fsync(fd) == 0;
  const int saved = errno;
  ::close(fd);
  if (!written) return absl::UnavailableError(fmt::format("pull log {}: {}", path, std::strerror(saved)));
  MutexLock lock(&mu_);
  last_pull_seq_[owner] = record.seq;
  if (record.tenant != owner) {
    if (tickets_.size() >= kMaxPullTickets) {
      auto oldest = tickets_.begin();
      for (auto it = tickets_.begin(); it != tickets_.end(); ++it) {
        if (it->second < oldest->second) oldest = it;
      }
      tickets_.erase(oldest);
    }
    tickets_[{record.tenant, owner, record.commit}] = clock_.Monotonic() + kPullTicketTtl;
  }
  return record;
}

absl::StatusOr<std::vector<PullRecord>> ModelRegistry::Pulls(const std::string& owner, const std::string& model,
                                                             int64_t after_seq, size_t limit) const {
  std::vector<PullRecord> out;
  std::ifstream log(OwnerDir(owner) + "/pulls.jsonl");
  int64_t seq = 0;
  for (std::string line; out.size() < limit && std::getline(log, line);) {
    if (++seq <= after_seq) continue;
    absl::StatusOr<J> j = line.size() > kMaxPullLine ? absl::InvalidArgumentError("long") : ParseJsonBounded(line);
    if (!j.ok() || !j->is_object()) continue;
    PullRecord p;
    p.seq = seq;
    p.time_unix_s = j->value("time", int64_t{0});
    p.user = j->value("user", "");
    p.tenant = j->value("tenant", "");
    p.model = j->value("model", "");
    p.commit = j->value("commit", "");
    if (model.empty() || p.model == model) out.push_back(std::move(p));
  }
  return out;
}

bool ModelRegistry::HasPullTicket(const std::string& tenant, const std::string& owner,
                                  const std::string& commit) const {
  MutexLock lock(&mu_);
  auto it = tickets_.find({Tenant(tenant), Tenant(owner), commit});
  return it != tickets_.end() && clock_.Monotonic() < it->second;
}

}  // namespace gpugeek::controlplane

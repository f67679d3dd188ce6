#include "cli/top_view.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <sstream>

#include <fmt/format.h>

#include "api/job_spec.h"
#include "cli/client.h"
#include "common/table.h"
#include "common/units.h"

namespace gpugeek::cli {
namespace {

using nlohmann::json;

constexpr int kBarCells = 10;

// A block of the screen below the header: lines always shown with it, then rows that may be cut.
struct Section {
  std::vector<std::string> fixed;
  std::vector<std::string> rows;
  std::vector<bool> counted;  // rows that "+N more" counts (GPU rows, not the nodes' title lines)
  std::string noun;           // "nodes", "GPUs", "jobs"
};

std::vector<std::string> SplitLines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// The number at `key` of an object, if it is one.
std::optional<double> Number(const json& j, const char* key) {
  if (!j.is_object()) return std::nullopt;
  auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return std::nullopt;
  return it->get<double>();
}

int64_t Int(const json& j, const char* key) {
  const std::optional<double> v = Number(j, key);
  return v ? static_cast<int64_t>(std::llround(*v)) : 0;
}

std::string Str(const json& j, const char* key) {
  if (!j.is_object()) return "";
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : "";
}

json Array(const json& j, const char* key) {
  if (!j.is_object()) return json::array();
  auto it = j.find(key);
  return it != j.end() && it->is_array() ? *it : json::array();
}

std::string Health(const json& h) {
  if (!h.is_object()) return "-";
  if (h.value("lost", false)) return "lost";
  std::vector<std::string> problems;
  if (const std::string error = Str(h, "error"); !error.empty()) problems.push_back(error);
  if (const int64_t ecc = Int(h, "ecc_uncorrected"); ecc > 0) problems.push_back(fmt::format("ecc {}", ecc));
  if (h.value("retirement_pending", json()).is_boolean() && h["retirement_pending"].get<bool>()) {
    problems.push_back("retirement pending");
  }
  if (const json xid = Array(h, "xid_errors"); !xid.empty()) {
    std::string codes;
    for (const json& x : xid) codes += (codes.empty() ? "" : ",") + Text(x);
    problems.push_back("xid " + codes);
  }
  if (problems.empty()) return "ok";
  std::string out;
  for (const auto& p : problems) out += (out.empty() ? "" : ", ") + p;
  return out;
}

// The header's summary line.
std::string Summary(const json& nodes, const json& pool) {
  int up = 0;
  for (const json& n : nodes) up += Str(n, "state") != "down" ? 1 : 0;
  int64_t gpus = 0, busy = 0;
  for (const json& r : Array(pool, "rows")) {
    gpus += Int(r, "gpus");
    busy += Int(r, "gpus") - Int(r, "gpus_fully_free");
  }
  const std::string policy = Str(pool, "policy");
  return fmt::format("nodes {}/{} up  GPUs {}/{} allocated  milli-GPU {}/{}  FGD frag {:.1f}% (policy {})  pending {}",
                     up, nodes.size(), busy, gpus, Int(pool, "gpu_milli_allocated"), Int(pool, "gpu_milli_total"),
                     100.0 * Number(pool, "frag_rate").value_or(0.0), policy.empty() ? "-" : policy,
                     Int(pool, "pending_jobs"));
}

Section NodesSection(const json& nodes) {
  Section s{.fixed = {""}, .noun = "nodes"};
  if (nodes.empty()) {
    s.fixed.push_back("No nodes registered (start one with `gpugeek agent --server URL`).");
    return s;
  }
  TextTable table({"NODE", "STATE", "CAPACITY", "GPUS", "MILLI-GPU"});
  table.AlignRight(4);
  for (const json& n : nodes) {
    const json gpus = Array(n.value("inventory", json::object()), "gpus");
    table.AddRow({Str(n, "name"), Str(n, "state"), Str(n, "capacity_type"), GpuSummary(gpus),
                  fmt::format("{}/{}", Int(n, "gpu_milli_allocated"), static_cast<int64_t>(gpus.size()) * 1000)});
  }
  std::vector<std::string> lines = SplitLines(table.Render());
  s.fixed.push_back(lines[0]);
  s.rows.assign(lines.begin() + 1, lines.end());
  s.counted.assign(s.rows.size(), true);
  return s;
}

// Model services, one row per version: its weight (the configured split), the requests the gateways answered for
// it and their share (the observed split), and its replicas (desired per version; READY per service).
Section ServicesSection(const json& services) {
  Section s{.fixed = {""}, .noun = "service versions"};
  TextTable table({"SERVICE", "VERSION", "WEIGHT", "REQUESTS", "SHARE", "REPLICAS", "READY"});
  for (size_t c : {2, 3, 4, 5, 6}) table.AlignRight(c);
  for (const json& svc : services) {
    const json versions = Array(svc, "versions");
    int64_t total = 0;
    for (const json& v : versions) total += Int(v, "requests");
    bool first = true;
    for (const json& v : versions) {
      const int64_t n = Int(v, "requests");
      table.AddRow({first ? Str(svc, "name") : "", Str(v, "name"), fmt::format("{}%", Int(v, "weight")),
                    std::to_string(n), total > 0 ? fmt::format("{:.1f}%", 100.0 * n / total) : "-",
                    std::to_string(Int(v, "desired")), first ? std::to_string(Int(svc, "ready")) : ""});
      first = false;
    }
  }
  std::vector<std::string> lines = SplitLines(table.Render());
  s.fixed.push_back(lines[0]);
  s.rows.assign(lines.begin() + 1, lines.end());
  s.counted.assign(s.rows.size(), true);
  return s;
}

// The active (SCHEDULED or RUNNING) jobs on each GPU: "node/index" -> "j-1,j-2".
std::map<std::string, std::string> JobsByGpu(const json& jobs) {
  std::map<std::string, std::string> out;
  for (const json& j : jobs) {
    const std::string state = Str(j, "state");
    const json allocation = j.value("allocation", json());
    if ((state != "RUNNING" && state != "SCHEDULED") || !allocation.is_object() ||
        allocation.value("released", false)) {
      continue;
    }
    for (const json& m : Array(allocation, "members")) {
      for (const json& g : Array(m, "gpus")) {
        std::string& ids = out[fmt::format("{}/{}", Str(m, "node"), Text(g))];
        ids += (ids.empty() ? "" : ",") + Str(j, "id");
      }
    }
  }
  return out;
}

Section GpusSection(const json& nodes, const json& jobs) {
  Section s{.fixed = {""}, .noun = "GPUs"};
  const std::map<std::string, std::string> on_gpu = JobsByGpu(jobs);
  TextTable table({"GPU", "UTIL", "MEMORY", "TEMP", "POWER", "HEALTH", "JOBS"});
  table.AlignRight(0);
  table.AlignRight(3);
  table.AlignRight(4);
  // Node i's GPU rows are table rows [first[i], first[i] + count[i]).
  std::vector<size_t> count;
  for (const json& n : nodes) {
    const json gpus = Array(n.value("inventory", json::object()), "gpus");
    const json samples = Array(n, "samples");
    count.push_back(gpus.size());
    for (size_t i = 0; i < gpus.size(); ++i) {
      const json& g = gpus[i];
      const json& sample = i < samples.size() ? samples[i] : g;  // the latest sample, else the inventory's
      const json t = sample.value("telemetry", json::object());
      const std::optional<double> util = Number(t, "utilization_percent");
      const std::optional<double> used = Number(t, "memory_used_bytes");
      const std::optional<double> temp = Number(t, "temperature_celsius");
      const std::optional<double> power = Number(t, "power_milliwatts");
      const double total = Number(g, "memory_total_bytes").value_or(0.0);
      std::string memory = "-";
      if (used) {
        memory = fmt::format("{} {}/{}", Bar(total > 0 ? 100.0 * *used / total : 0.0, kBarCells),
                             FormatBytes(static_cast<uint64_t>(*used)), FormatBytes(static_cast<uint64_t>(total)));
      }
      const std::string index = Text(g.value("index", json(i)));
      const auto job_ids = on_gpu.find(fmt::format("{}/{}", Str(n, "name"), index));
      table.AddRow({index, util ? fmt::format("{} {:>3}%", Bar(*util, kBarCells), std::llround(*util)) : "-", memory,
                    temp ? fmt::format("{}C", std::llround(*temp)) : "-",
                    power ? fmt::format("{}W", std::llround(*power / 1000.0)) : "-",
                    Health(sample.value("health", json())), job_ids == on_gpu.end() ? "" : job_ids->second});
    }
  }
  const std::vector<std::string> lines = SplitLines(table.Render());
  s.fixed.push_back("  " + lines[0]);
  size_t next = 1;
  for (size_t k = 0; k < nodes.size(); ++k) {
    const json& n = nodes[k];
    const std::string state = Str(n, "state");
    s.rows.push_back(fmt::format("{}  {}{}", Str(n, "name"),
                                 GpuSummary(Array(n.value("inventory", json::object()), "gpus")),
                                 state == "ready" || state.empty() ? "" : " [" + state + "]"));
    s.counted.push_back(false);
    for (size_t i = 0; i < count[k]; ++i) {
      s.rows.push_back("  " + lines[next++]);
      s.counted.push_back(true);
    }
  }
  return s;
}

int StateRank(const std::string& state) {
  if (state == "RUNNING") return 0;
  if (state == "SCHEDULED") return 1;
  if (state == "PENDING") return 2;
  return 3;
}

// GPUs of a job: its allocation's, else the plan's best, else the spec's first accelerator request.
std::string JobGpus(const json& job) {
  const json allocation = job.value("allocation", json());
  if (allocation.is_object()) {
    int64_t milli = 0;
    for (const json& m : Array(allocation, "members")) {
      milli += static_cast<int64_t>(Array(m, "gpus").size()) * (Number(m, "gpu_milli") ? Int(m, "gpu_milli") : 1000);
    }
    return Gpus(milli);
  }
  const json alternatives = Array(job.value("plan", json()), "alternatives");
  if (!alternatives.empty() && Number(alternatives[0], "gpus")) return Text(alternatives[0]["gpus"]);
  if (const std::string yaml = Str(job, "spec_yaml"); !yaml.empty()) {
    auto spec = api::ParseJobSpec(yaml);
    if (spec.ok() && !spec->resources.any_of.empty()) {
      const api::AcceleratorRequest& a = spec->resources.any_of[0];
      return Gpus(a.count * a.milli_per_gpu * spec->num_nodes);
    }
  }
  return "-";
}

std::string JobNodes(const json& job) {
  std::vector<std::string> nodes;
  for (const json& m : Array(job.value("allocation", json()), "members")) {
    const std::string node = Str(m, "node");
    if (std::find(nodes.begin(), nodes.end(), node) == nodes.end()) nodes.push_back(node);
  }
  std::string out;
  for (const auto& n : nodes) out += (out.empty() ? "" : ",") + n;
  return out.empty() ? "-" : out;
}

Section JobsSection(const json& jobs_in, TimePoint now) {
  Section s{.fixed = {""}, .noun = "jobs"};
  std::vector<json> jobs(jobs_in.begin(), jobs_in.end());
  if (jobs.empty()) {
    s.fixed.push_back("No jobs.");
    return s;
  }
  std::stable_sort(jobs.begin(), jobs.end(), [](const json& a, const json& b) {
    const int ra = StateRank(Str(a, "state")), rb = StateRank(Str(b, "state"));
    if (ra != rb) return ra < rb;
    if (ra < 3) return Str(a, "id") < Str(b, "id");  // active: oldest first
    const std::string ua = Str(a, "updated_at"), ub = Str(b, "updated_at");
    return ua != ub ? ua > ub : Str(a, "id") > Str(b, "id");  // finished: latest first
  });
  TextTable table({"ID", "NAME", "STATE", "TENANT", "GPUS", "NODES", "AGE"});
  table.AlignRight(4);
  table.AlignRight(6);
  for (const json& j : jobs) {
    const std::string tenant = Str(j, "tenant");
    table.AddRow({Str(j, "id"), Str(j, "name"), Str(j, "state"), tenant.empty() ? "-" : tenant, JobGpus(j), JobNodes(j),
                  Age(Str(j, "created_at"), now)});
  }
  std::vector<std::string> lines = SplitLines(table.Render());
  s.fixed.push_back(lines[0]);
  s.rows.assign(lines.begin() + 1, lines.end());
  s.counted.assign(s.rows.size(), true);
  return s;
}

// Appends the sections to `out` within `avail` lines (< 0: no limit).
void Fit(const std::vector<Section>& sections, int avail, std::vector<std::string>* out) {
  if (avail < 0) {
    for (const Section& s : sections) {
      out->insert(out->end(), s.fixed.begin(), s.fixed.end());
      out->insert(out->end(), s.rows.begin(), s.rows.end());
    }
    return;
  }
  // The sections that fit with their fixed lines and one row (or "+N more") each, from the top.
  size_t n = 0;
  int need = 0;
  for (; n < sections.size(); ++n) {
    const int more = static_cast<int>(sections[n].fixed.size()) + (sections[n].rows.empty() ? 0 : 1);
    if (need + more > avail) break;
    need += more;
  }
  int budget = avail;
  for (size_t i = 0; i < n; ++i) budget -= static_cast<int>(sections[i].fixed.size());
  // Rows are dealt out one at a time, so a long table cannot crowd out the others.
  std::vector<size_t> shown(n, 0);
  for (bool dealt = true; dealt && budget > 0;) {
    dealt = false;
    for (size_t i = 0; i < n && budget > 0; ++i) {
      if (shown[i] < sections[i].rows.size()) {
        ++shown[i];
        --budget;
        dealt = true;
      }
    }
  }
  for (size_t i = 0; i < n; ++i) {
    const Section& s = sections[i];
    out->insert(out->end(), s.fixed.begin(), s.fixed.end());
    if (shown[i] == s.rows.size()) {
      out->insert(out->end(), s.rows.begin(), s.rows.end());
      continue;
    }
    const size_t keep = shown[i] - 1;  // the last slot says what was left out
    out->insert(out->end(), s.rows.begin(), s.rows.begin() + static_cast<std::ptrdiff_t>(keep));
    const auto hidden = std::count(s.counted.begin() + static_cast<std::ptrdiff_t>(keep), s.counted.end(), true);
    out->push_back(hidden > 0 ? fmt::format("+{} more {}", hidden, s.noun)
                              : fmt::format("+{} more lines", s.rows.size() - keep));
  }
}

}  // namespace

std::string Bar(double percent, int cells) {
  const double p = std::clamp(std::isnan(percent) ? 0.0 : percent, 0.0, 100.0);
  const int filled = std::clamp(static_cast<int>(std::floor(p * cells / 100.0 + 0.5)), 0, cells);
  return "[" + std::string(static_cast<size_t>(filled), '|') + std::string(static_cast<size_t>(cells - filled), ' ') +
         "]";
}

std::string Age(const std::string& server_time, TimePoint now) {
  std::string ago = Ago(server_time, now);
  if (ago == "just now") return "0s";
  const std::string suffix = " ago";
  if (ago.size() > suffix.size() && ago.compare(ago.size() - suffix.size(), suffix.size(), suffix) == 0) {
    ago.resize(ago.size() - suffix.size());
  }
  return ago;
}

std::vector<std::string> RenderTop(const TopScreen& screen, int width, int height) {
  std::vector<std::string> out;
  out.push_back(
      fmt::format("gpugeek top  {}  {}{}", screen.server, screen.clock, screen.hint.empty() ? "" : "  " + screen.hint));
  const bool have = screen.data.is_object();
  const json nodes = have ? Array(screen.data, "nodes") : json::array();
  if (have) out.push_back(Summary(nodes, screen.data.value("pool", json::object())));
  if (!screen.error.empty()) {
    out.push_back("! " + screen.error);
  } else if (!have) {
    out.push_back("waiting for the first refresh...");
  }
  if (have) {
    std::vector<Section> sections = {NodesSection(nodes)};
    if (!nodes.empty()) sections.push_back(GpusSection(nodes, Array(screen.data, "jobs")));
    sections.push_back(JobsSection(Array(screen.data, "jobs"), screen.now));
    if (const json services = Array(screen.data, "services"); !services.empty()) {
      sections.push_back(ServicesSection(services));
    }
    Fit(sections, height > 0 ? std::max(0, height - static_cast<int>(out.size())) : -1, &out);
  }
  if (height > 0 && out.size() > static_cast<size_t>(height)) out.resize(static_cast<size_t>(height));
  if (width > 0) {
    for (std::string& line : out) {
      if (line.size() > static_cast<size_t>(width)) line.resize(static_cast<size_t>(width));
    }
  }
  return out;
}

}  // namespace gpugeek::cli

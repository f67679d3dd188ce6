#include "gateway/route_table.h"

#include <arpa/inet.h>

#include <algorithm>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "api/bounded_yaml.h"
#include "api/quantity.h"
#include "common/absl_view.h"

namespace gpugeek::gateway {

namespace {

bool IsLabel(std::string_view s) {
  if (s.empty() || s.size() > 63 || s.front() == '-' || s.back() == '-') return false;
  for (char c : s) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) return false;
  }
  return true;
}

absl::Status Field(std::string_view path, std::string_view message) {
  return absl::InvalidArgumentError(absl::StrCat(AbslView(path), ": ", AbslView(message)));
}

}  // namespace

bool IsHttpToken(std::string_view s) {
  if (s.empty() || s.size() > 256) return false;
  for (unsigned char c : s) {
    if (absl::ascii_isalnum(c)) continue;
    if (std::string_view("!#$%&'*+-.^_`|~").find(static_cast<char>(c)) == std::string_view::npos) return false;
  }
  return true;
}

absl::Status ValidateRouteTable(const RouteTable& table) {
  std::set<std::string> services;
  for (size_t i = 0; i < table.routes.size(); ++i) {
    const ServiceRoute& r = table.routes[i];
    const std::string p = absl::StrCat("routes[", i, "]");
    if (!IsLabel(r.service)) {
      return Field(p + ".service", absl::StrCat("\"", r.service, "\" is not a name of 1 to 63 of a-z, 0-9 and '-'"));
    }
    if (!services.insert(r.service).second) {
      return Field(p + ".service", absl::StrCat("\"", r.service, "\" has two routes; give each service one"));
    }
    if (r.path_prefix.empty() || r.path_prefix.front() != '/' || r.path_prefix.size() > 1024) {
      return Field(p + ".path_prefix", "must start with '/' (at most 1024 characters)");
    }
    for (size_t h = 0; h < r.hosts.size(); ++h) {
      if (r.hosts[h].empty() || r.hosts[h].size() > 253) {
        return Field(absl::StrCat(p, ".hosts[", h, "]"), "must be a host name of 1 to 253 characters");
      }
    }
    if (r.retries < 0 || r.retries > 5) return Field(p + ".retries", "must be 0 to 5");
    if (r.activator_queue > 1'000'000) return Field(p + ".activator.queue", "must be 0 to 1000000 requests");
    if (r.activator_timeout < std::chrono::seconds(1) || r.activator_timeout > std::chrono::hours(1)) {
      return Field(p + ".activator.timeout", "must be 1s to 1h");
    }
    if (r.auth_tenant.size() > 64 ||
        std::any_of(r.auth_tenant.begin(), r.auth_tenant.end(), [](char ch) { return ch < 0x21 || ch == 0x7f; })) {
      return Field(p + ".auth.tenant", "must be a tenant name: 1 to 64 characters, no spaces or control characters");
    }
    if (r.sticky.kind != StickyKind::kNone && !IsHttpToken(r.sticky.name)) {
      return Field(p + ".sticky",
                   absl::StrCat("\"", r.sticky.name, "\" is not a header or cookie name (an HTTP token)"));
    }
    int sum = 0;
    std::set<std::string> versions, ids;
    for (size_t v = 0; v < r.versions.size(); ++v) {
      const VersionEndpoints& ve = r.versions[v];
      const std::string vp = absl::StrCat(p, ".versions[", v, "]");
      if (!IsLabel(ve.name) || ve.name.size() > 32) {
        return Field(vp + ".name", absl::StrCat("\"", ve.name, "\" is not a name of 1 to 32 of a-z, 0-9 and '-'"));
      }
      if (!versions.insert(ve.name).second) return Field(vp + ".name", absl::StrCat("\"", ve.name, "\" twice"));
      if (ve.weight_percent < 0 || ve.weight_percent > 100) return Field(vp + ".weight", "must be 0 to 100 (percent)");
      sum += ve.weight_percent;
      for (size_t k = 0; k < ve.replicas.size(); ++k) {
        const ReplicaEndpoint& e = ve.replicas[k];
        const std::string rp = absl::StrCat(vp, ".replicas[", k, "]");
        if (e.id.empty() || e.id.size() > 128) return Field(rp + ".id", "must be 1 to 128 characters");
        if (!ids.insert(e.id).second) return Field(rp + ".id", absl::StrCat("\"", e.id, "\" twice in the service"));
        in_addr a{};
        if (inet_pton(AF_INET, e.host.c_str(), &a) != 1 || e.port == 0) {
          return Field(rp + ".address", absl::StrCat("\"", e.host, ":", e.port, "\" is not a numeric IPv4 host:port"));
        }
        if (e.capacity_milli <= 0) return Field(rp + ".capacity_milli", "must be above 0");
      }
    }
    if (!r.versions.empty() && sum != 100) {
      return Field(p + ".versions", absl::StrCat("weights sum to ", sum, "; they must sum to 100"));
    }
  }
  return absl::OkStatus();
}

namespace {

absl::StatusOr<std::string> Scalar(const YAML::Node& n, const std::string& path) {
  if (!n.IsScalar()) return Field(path, "must be a scalar");
  return n.Scalar();
}

absl::StatusOr<int64_t> Int(const YAML::Node& n, const std::string& path) {
  if (!n.IsScalar()) return Field(path, "must be an integer");
  int64_t v = 0;
  if (!absl::SimpleAtoi(n.Scalar(), &v)) return Field(path, absl::StrCat("\"", n.Scalar(), "\" is not an integer"));
  return v;
}

absl::Status OnlyKeys(const YAML::Node& n, const std::string& path, std::initializer_list<std::string_view> keys) {
  if (!n.IsMap()) return Field(path, "must be a mapping");
  for (const auto& kv : n) {
    const std::string k = kv.first.IsScalar() ? kv.first.Scalar() : "";
    bool known = false;
    for (std::string_view key : keys) known = known || key == k;
    if (!known) return Field(path, absl::StrCat("unknown field \"", k, "\""));
  }
  return absl::OkStatus();
}

#define GW_ASSIGN(lhs, expr)          \
  do {                                \
    auto _r = (expr);                 \
    if (!_r.ok()) return _r.status(); \
    lhs = *std::move(_r);             \
  } while (0)

absl::StatusOr<ReplicaEndpoint> ParseReplica(const YAML::Node& n, const std::string& p) {
  if (auto s = OnlyKeys(n, p, {"id", "address", "capacity_milli"}); !s.ok()) return s;
  ReplicaEndpoint e;
  std::string address;
  GW_ASSIGN(address, Scalar(n["address"], p + ".address"));
  const size_t colon = address.rfind(':');
  int64_t port = 0;
  if (colon == std::string::npos || !absl::SimpleAtoi(address.substr(colon + 1), &port) || port <= 0 || port > 65535) {
    return Field(p + ".address", absl::StrCat("\"", address, "\" is not host:port"));
  }
  e.host = address.substr(0, colon);
  e.port = static_cast<uint16_t>(port);
  if (n["id"]) {
    GW_ASSIGN(e.id, Scalar(n["id"], p + ".id"));
  } else {
    e.id = address;
  }
  if (n["capacity_milli"]) GW_ASSIGN(e.capacity_milli, Int(n["capacity_milli"], p + ".capacity_milli"));
  return e;
}

absl::StatusOr<ServiceRoute> ParseRoute(const YAML::Node& n, const std::string& p) {
  if (auto s = OnlyKeys(
          n, p,
          {"service", "hosts", "path_prefix", "sticky", "retries", "activator", "pipelining", "auth", "versions"});
      !s.ok()) {
    return s;
  }
  ServiceRoute r;
  GW_ASSIGN(r.service, Scalar(n["service"], p + ".service"));
  if (const YAML::Node hosts = n["hosts"]) {
    if (!hosts.IsSequence()) return Field(p + ".hosts", "must be a list of host names");
    for (size_t i = 0; i < hosts.size(); ++i) {
      std::string h;
      GW_ASSIGN(h, Scalar(hosts[i], absl::StrCat(p, ".hosts[", i, "]")));
      r.hosts.push_back(absl::AsciiStrToLower(h));
    }
  }
  if (n["path_prefix"]) GW_ASSIGN(r.path_prefix, Scalar(n["path_prefix"], p + ".path_prefix"));
  if (const YAML::Node sticky = n["sticky"]) {
    if (auto s = OnlyKeys(sticky, p + ".sticky", {"header", "cookie"}); !s.ok()) return s;
    if (sticky.size() != 1) return Field(p + ".sticky", "give exactly one of header or cookie");
    r.sticky.kind = sticky["header"] ? StickyKind::kHeader : StickyKind::kCookie;
    GW_ASSIGN(r.sticky.name, Scalar(sticky["header"] ? sticky["header"] : sticky["cookie"], p + ".sticky"));
  }
  if (n["retries"]) {
    int64_t v = 0;
    GW_ASSIGN(v, Int(n["retries"], p + ".retries"));
    if (v < 0 || v > 5) return Field(p + ".retries", "must be 0 to 5");
    r.retries = static_cast<int>(v);
  }
  if (const YAML::Node a = n["activator"]) {
    if (auto s = OnlyKeys(a, p + ".activator", {"queue", "timeout"}); !s.ok()) return s;
    if (a["queue"]) {
      int64_t q = 0;
      GW_ASSIGN(q, Int(a["queue"], p + ".activator.queue"));
      if (q < 0 || q > 1'000'000) return Field(p + ".activator.queue", "must be 0 to 1000000 requests");
      r.activator_queue = static_cast<size_t>(q);
    }
    if (a["timeout"]) {
      std::string t;
      GW_ASSIGN(t, Scalar(a["timeout"], p + ".activator.timeout"));
      auto d = api::ParseDuration(t);
      if (!d.ok()) return Field(p + ".activator.timeout", std::string(d.status().message()));
      r.activator_timeout = *d;
    }
  }
  if (const YAML::Node auth = n["auth"]) {
    if (auto s = OnlyKeys(auth, p + ".auth", {"tenant"}); !s.ok()) return s;
    GW_ASSIGN(r.auth_tenant, Scalar(auth["tenant"], p + ".auth.tenant"));
    if (r.auth_tenant.empty()) return Field(p + ".auth.tenant", "must name the tenant whose tokens may call");
  }
  if (n["pipelining"]) {
    std::string b;
    GW_ASSIGN(b, Scalar(n["pipelining"], p + ".pipelining"));
    if (b != "true" && b != "false") return Field(p + ".pipelining", "must be true or false");
    r.pipelining = b == "true";
  }
  if (const YAML::Node versions = n["versions"]) {
    if (!versions.IsSequence()) return Field(p + ".versions", "must be a list");
    for (size_t v = 0; v < versions.size(); ++v) {
      const std::string vp = absl::StrCat(p, ".versions[", v, "]");
      const YAML::Node vn = versions[v];
      if (auto s = OnlyKeys(vn, vp, {"name", "weight", "replicas"}); !s.ok()) return s;
      VersionEndpoints ve;
      GW_ASSIGN(ve.name, Scalar(vn["name"], vp + ".name"));
      int64_t w = 0;
      GW_ASSIGN(w, Int(vn["weight"], vp + ".weight"));
      if (w < 0 || w > 100) return Field(vp + ".weight", "must be 0 to 100 (percent)");
      ve.weight_percent = static_cast<int>(w);
      if (const YAML::Node reps = vn["replicas"]) {
        if (!reps.IsSequence()) return Field(vp + ".replicas", "must be a list");
        for (size_t k = 0; k < reps.size(); ++k) {
          ReplicaEndpoint e;
          GW_ASSIGN(e, ParseReplica(reps[k], absl::StrCat(vp, ".replicas[", k, "]")));
          ve.replicas.push_back(std::move(e));
        }
      }
      r.versions.push_back(std::move(ve));
    }
  }
  return r;
}

}  // namespace

absl::StatusOr<RouteTable> ParseRouteTable(std::string_view yaml_text) {
  auto doc = api::LoadBoundedYaml(yaml_text, "route table", "route table");
  if (!doc.ok()) return doc.status();
  try {
    if (auto s = OnlyKeys(*doc, "routes file", {"routes"}); !s.ok()) return s;
    const YAML::Node routes = (*doc)["routes"];
    if (!routes || !routes.IsSequence()) return Field("routes", "must be a list of routes");
    RouteTable t;
    for (size_t i = 0; i < routes.size(); ++i) {
      ServiceRoute r;
      GW_ASSIGN(r, ParseRoute(routes[i], absl::StrCat("routes[", i, "]")));
      t.routes.push_back(std::move(r));
    }
    if (auto s = ValidateRouteTable(t); !s.ok()) return s;
    return t;
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("route table: ", e.what()));
  }
}

int MatchRoute(const RouteTable& table, std::string_view host, std::string_view target) {
  if (const size_t colon = host.rfind(':');
      colon != std::string_view::npos && host.find(']') == std::string_view::npos) {
    host = host.substr(0, colon);
  }
  int best = -1;
  size_t best_len = 0;
  for (size_t i = 0; i < table.routes.size(); ++i) {
    const ServiceRoute& r = table.routes[i];
    if (!r.hosts.empty()) {
      bool match = false;
      for (const std::string& h : r.hosts) match = match || absl::EqualsIgnoreCase(h, AbslView(host));
      if (!match) continue;
    }
    if (!absl::StartsWith(AbslView(target), r.path_prefix)) continue;
    // A prefix matches at a segment boundary: "/gpt" takes "/gpt" and "/gpt/x", not "/gpt2".
    if (r.path_prefix.back() != '/' && target.size() > r.path_prefix.size()) {
      const char next = target[r.path_prefix.size()];
      if (next != '/' && next != '?') continue;
    }
    const size_t len = r.path_prefix.size() + (r.hosts.empty() ? 0 : 4096);
    if (best < 0 || len > best_len) {
      best = static_cast<int>(i);
      best_len = len;
    }
  }
  return best;
}

}  // namespace gpugeek::gateway

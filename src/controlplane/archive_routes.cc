#include "controlplane/archive_routes.h"

#include <cstdlib>

#include <fmt/format.h>

#include "common/absl_fmt.h"
#include "common/status_macros.h"
#include "controlplane/access.h"
#include "http/status_http.h"

namespace gpugeek::controlplane {
namespace {

using http::Reply;
using http::Request;

absl::StatusOr<uint64_t> U64Query(const Request& r, const std::string& name) {
  const std::string v = r.query_value(name);
  char* end = nullptr;
  const unsigned long long n = std::strtoull(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || v[0] == '-') {
    return absl::InvalidArgumentError(
        fmt::format("query parameter '{}' = '{}' must be a byte count (offset=0&total=ARCHIVE_BYTES for one piece)",
                    name, v.substr(0, 40)));
  }
  return static_cast<uint64_t>(n);
}

// The archive's bytes, streamed from its sealed records.
Reply Stream(const ArchiveStore& archives, std::string tenant, std::string digest) {
  Reply reply;
  reply.content_type = "application/octet-stream";
  reply.stream = [&archives, tenant = std::move(tenant), digest = std::move(digest)](const http::ChunkWriter& write) {
    // An error after the head was sent can only cut the stream short; the reader's digest check catches it.
    (void)archives.Read(tenant, digest, [&](std::string_view piece) { return write(std::string(piece)); });
  };
  return reply;
}

absl::StatusOr<Reply> Put(ArchiveStore& archives, const Principal& who, const Request& r) {
  ASSIGN_OR_RETURN(uint64_t offset, U64Query(r, "offset"));
  ASSIGN_OR_RETURN(uint64_t total, U64Query(r, "total"));
  const std::string digest = r.param("digest");
  absl::StatusOr<ArchiveStore::PutResult> put = archives.Put(who.tenant, digest, offset, total, r.body);
  if (!put.ok()) {
    // Over a limit of this server's (--max-archive-bytes / --max-archive-files): 413, the limit named.
    if (absl::IsResourceExhausted(put.status()) && put.status().message().find("--max-archive-") != std::string::npos) {
      return Reply::Json(http::ErrorBody(put.status(), {{"limit_bytes", archives.options().max_archive_bytes},
                                                        {"limit_files", archives.options().max_entries}}),
                         413);
    }
    return put.status();
  }
  return Reply::Json(
      {{"digest", digest}, {"received", put->received}, {"complete", put->complete}, {"entries", put->entries}});
}

}  // namespace

void RegisterArchiveRoutes(http::Server& server, Accounts& accounts, ArchiveStore& archives) {
  const std::string pattern = "/v1/archives/{digest}";
  GuardedRoute(server, accounts, "HEAD", pattern, [&archives](const Principal& who, const Request& r) {
    if (!archives.Has(who.tenant, r.param("digest"))) {
      return absl::StatusOr<Reply>(absl::NotFoundError(fmt::format("no archive {}", r.param("digest").substr(0, 80))));
    }
    Reply reply;
    reply.content_type = "application/octet-stream";
    return absl::StatusOr<Reply>(std::move(reply));
  });
  GuardedRoute(server, accounts, "GET", pattern, [&archives](const Principal& who, const Request& r) {
    if (!archives.Has(who.tenant, r.param("digest"))) {
      return absl::StatusOr<Reply>(absl::NotFoundError(fmt::format("no archive {}", r.param("digest").substr(0, 80))));
    }
    return absl::StatusOr<Reply>(Stream(archives, who.tenant, r.param("digest")));
  });
  GuardedRoute(server, accounts, "PUT", pattern,
               [&archives](const Principal& who, const Request& r) { return Put(archives, who, r); });
}

void RegisterAgentArchiveRoute(http::Server& server, ArchiveStore& archives, ControlPlane& cp, NodeAuthority& nodes) {
  server.Route("GET", "/v1/agents/{node}/archives/{digest}",
               [&archives, &cp, &nodes](const Request& r) -> absl::StatusOr<Reply> {
                 auto it = r.headers.find("authorization");
                 RETURN_IF_ERROR(nodes.AuthenticateNode(
                     it == r.headers.end() ? std::string_view() : std::string_view(it->second), r.param("node")));
                 const std::string digest = r.param("digest");
                 // Only the archive of a job this node holds a member of; anything else reads as absent.
                 std::optional<std::string> tenant = cp.ArchiveTenantFor(r.param("node"), digest);
                 if (!tenant.has_value() || !archives.Has(*tenant, digest)) {
                   return absl::NotFoundError(fmt::format("no archive {} for a job assigned to node {}",
                                                          digest.substr(0, 80), r.param("node")));
                 }
                 return Stream(archives, *tenant, digest);
               });
}

}  // namespace gpugeek::controlplane

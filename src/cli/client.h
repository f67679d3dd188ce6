#pragma once
// Shared helpers of the client commands (`gpugeek submit`, `jobs`, `nodes`, ...) and `gpugeek server`:
// the server, token and CA to use (flags, environment, then the profile of config.h), the one way a command
// fails (`gpugeek <cmd>: <message>` on stderr, then CLI::RuntimeError(code)), JSON output, and the
// rendering of the server's times. No business logic: these only talk to the REST API and print.

#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "common/clock.h"
#include "http/client.h"

namespace gpugeek::cli {

inline constexpr char kDefaultServerUrl[] = "http://127.0.0.1:8470";

// Exit codes of the client commands: 1 when the server refused or failed the request (or a followed
// job did not succeed), 2 for bad local input (a flag, a file).
inline constexpr int kExitFailed = 1;
inline constexpr int kExitUsage = 2;

// The flags every client command takes (config.h says what each falls back to).
struct ClientFlags {
  std::string server;   // --server
  std::string token;    // --token
  std::string ca_file;  // --ca-file
  std::string profile;  // --profile
  bool json = false;
};
void AddClientFlags(CLI::App* sub, ClientFlags* flags);

// Where and as whom a command calls: flags, then $GPUGEEK_SERVER / $GPUGEEK_TOKEN / $GPUGEEK_CA_FILE,
// then the config file's profile (config.h), then kDefaultServerUrl with no token.
struct Endpoint {
  std::string server;
  std::string token;  // "" = none (only health and the API document answer then)
  std::string ca_file;
};
// InvalidArgument naming the file for an unreadable config or token file, or an unknown --profile.
absl::StatusOr<Endpoint> ResolveEndpoint(const ClientFlags& flags);

// The server URL alone (for display): as ResolveEndpoint, kDefaultServerUrl when the config is unreadable.
std::string ResolveServerUrl(const ClientFlags& flags);

// Prints "gpugeek <cmd>: <message>" to stderr and throws CLI::RuntimeError(code).
[[noreturn]] void Fail(const std::string& cmd, const std::string& message, int code = kExitFailed);

// A client for the resolved endpoint; fails the command on a malformed URL or config. `read_timeout` bounds the
// wait for each reply (and, when streaming, between chunks).
std::unique_ptr<http::Client> Connect(const std::string& cmd, const ClientFlags& flags,
                                      Duration read_timeout = std::chrono::seconds(30));

// Inside a job's member: a client of its node's workload endpoint ($GPUGEEK_AGENT_URL, with the member's
// $GPUGEEK_MEMBER_TOKEN; agent/workload_listener.h); the command fails with kExitUsage outside a member.
std::unique_ptr<http::Client> ConnectToAgent(const std::string& cmd);

// A local file of at most 16 MiB (what the server accepts in one request), or the command fails with
// kExitUsage naming it as `what`.
std::string ReadFileOrFail(const std::string& cmd, const std::filesystem::path& path, const std::string& what);

// The value of a call, or the command fails with the server's message (code kExitFailed).
nlohmann::json OrFail(const std::string& cmd, absl::StatusOr<nlohmann::json> reply);

// Every item of a paged listing (the server's paging.h): GET `path` (its query without limit/after, e.g.
// "/v1/budgets?tenant=team-a", or just "/v1/budgets") with limit=1000, following next_after, the items under
// `field` in order. `last_page`, when given, gets the last page (for fields beside the list). Fails the command
// as OrFail.
nlohmann::json AllPages(const std::string& cmd, http::Client& client, const std::string& path, const std::string& field,
                        nlohmann::json* last_page = nullptr);

// Pretty JSON on stdout (--json).
void PrintJson(const nlohmann::json& j);

// A server time ("2024-05-01T12:00:00.123Z") in the local time zone as RFC 3339, e.g.
// "2024-05-01T14:00:00+02:00"; the input unchanged when it does not parse; "-" when empty.
std::string LocalTime(const std::string& server_time);
// Seconds since the Unix epoch (a commit's or a pull's time) as UTC, "2024-05-01 12:00:00Z".
std::string UtcTime(int64_t unix_s);
// How long before `now` a server time was: "3s ago", "5m ago", "2h ago", "4d ago"; "-" when it does not parse.
std::string Ago(const std::string& server_time, TimePoint now);

using http::UrlEncode;  // percent-encodes a path segment or query value

// The JSON value as display text: strings unquoted, null as "-".
std::string Text(const nlohmann::json& j);

// An inventory's GPUs (the "gpus" array of hw::InventoryToJson) as "8 x A100-SXM-80GB", or
// "4 x A100-PCIe-80GB + 2 x L4" (runs of one model in device order); `none` when there are none.
std::string GpuSummary(const nlohmann::json& gpus, const std::string& none = "no GPUs");

// A duration flag: "3600s", "90m", "12h", "30d" (at most 9 digits) or "0" -> seconds; nullopt for anything
// else (the caller names the flag and the form in its message).
std::optional<int64_t> ParseDurationSeconds(const std::string& text);

// Milli-GPU as GPUs: 8000 -> "8", 2500 -> "2.5".
std::string Gpus(int64_t milli);

// The default data directory of `gpugeek server` / `gpugeek up`: $XDG_DATA_HOME/gpugeek, else
// ~/.local/share/gpugeek.
std::string DefaultDataDir();

// Splits "HOST:PORT" ("127.0.0.1:8470", "[::1]:0", ":8470" = 127.0.0.1); InvalidArgument saying the form.
absl::Status ParseListen(const std::string& listen, std::string* host, int* port);

}  // namespace gpugeek::cli

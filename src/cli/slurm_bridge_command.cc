// `gpugeek slurm-bridge --server URL --cluster NAME --slurmrestd URL --gpu-model TYPE=MODEL --job-root DIR ...`:
// a Slurm cluster as a region of the pool (backends/slurm/bridge.h): its GPU nodes join the control plane,
// the jobs placed on them run as Slurm batch jobs pinned there, until SIGINT or SIGTERM, which cancels the
// Slurm jobs it started (as an agent stops its workloads). Runs where sbatch and the cluster's SLURM_CONF
// work (a login node); slurmrestd authenticates it with a JWT (`scontrol token username=USER`).

#include <signal.h>

#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include "absl/strings/strip.h"
#include "api/agent_protocol.h"
#include "api/quantity.h"
#include "backends/slurm/bridge.h"
#include "cli/client.h"
#include "cli/commands.h"
#include "common/file.h"

namespace gpugeek::cli {

void RegisterSlurmBridgeCommand(CLI::App& app) {
  struct Options {
    std::string server, ca_file, join_token, join_token_file, cluster, slurmrestd, slurm_user, slurm_token_file,
        job_root, state_dir, partition, capacity_type = "on-demand", gpu_hour_price, api = "v0.0.38";
    std::vector<std::string> gpu_models;
  };
  auto o = std::make_shared<Options>();
  CLI::App* sub = app.add_subcommand("slurm-bridge",
                                     "Join a Slurm cluster's GPU nodes to the pool; run their jobs "
                                     "as Slurm batch jobs (until SIGINT/SIGTERM)");
  sub->add_option("--server", o->server, "The control plane's agent URL (as `gpugeek agent --server`)")->required();
  sub->add_option("--ca-file", o->ca_file, "CA certificate to verify an https server with");
  sub->add_option("--join-token", o->join_token,
                  "Join token for the nodes' first registration (default: $GPUGEEK_JOIN_TOKEN); give it as many uses "
                  "as the cluster has GPU nodes");
  sub->add_option("--join-token-file", o->join_token_file,
                  "File whose first line is the join token (keeps it out of the process list)");
  sub->add_option("--cluster", o->cluster, "The cluster's name: region slurm-NAME, nodes NAME-<slurm node>")
      ->required();
  sub->add_option("--slurmrestd", o->slurmrestd, "slurmrestd's URL (default: $SLURMRESTD_URL)");
  sub->add_option("--slurm-api", o->api, "slurmrestd's OpenAPI version")->capture_default_str();
  sub->add_option("--slurm-user", o->slurm_user, "X-SLURM-USER-NAME (default: $SLURMRESTD_USER)");
  sub->add_option("--slurm-token-file", o->slurm_token_file,
                  "File holding the JWT for slurmrestd, read again when slurmrestd refuses it, so a cron job can "
                  "refresh it (default: $SLURMRESTD_TOKEN)");
  sub->add_option("--gpu-model", o->gpu_models,
                  "GRES type = GPU catalog model, e.g. a100=A100-SXM-80GB (repeatable; nodes of other types stay out)")
      ->required();
  sub->add_option("--job-root", o->job_root, "Folder for the jobs' working folders, the same path on every node")
      ->required();
  sub->add_option("--state-dir", o->state_dir,
                  "Where the nodes' credentials and instance ids are kept, on this machine, not under --job-root "
                  "(default: $XDG_STATE_HOME or ~/.local/state, /gpugeek/slurm-bridge-CLUSTER)");
  sub->add_option("--partition", o->partition, "Slurm partition for the jobs (default: Slurm's default)");
  sub->add_option("--capacity-type", o->capacity_type, "on-demand | spot | reserved")->capture_default_str();
  sub->add_option("--gpu-hour-price", o->gpu_hour_price, "What a GPU-hour of these nodes costs, e.g. 0.85");
  sub->callback([o] {
    const std::string cmd = "slurm-bridge";
    auto env = [](const char* name) { return std::getenv(name) != nullptr ? std::string(std::getenv(name)) : ""; };
    backends::slurm::BridgeOptions b;
    b.cluster = o->cluster;
    b.server_url = o->server;
    b.ca_file = o->ca_file;
    b.join_token = o->join_token;
    if (b.join_token.empty() && !o->join_token_file.empty()) {
      auto text = ReadFileBounded(o->join_token_file, 4096, "join token file");
      if (!text.ok()) Fail(cmd, std::string(text.status().message()), 2);
      b.join_token = std::string(absl::StripAsciiWhitespace(text->substr(0, text->find('\n'))));
    }
    if (b.join_token.empty()) b.join_token = env("GPUGEEK_JOIN_TOKEN");
    b.job_root = o->job_root;
    if (o->state_dir.empty()) {
      const std::string base = !env("XDG_STATE_HOME").empty() ? env("XDG_STATE_HOME")
                               : !env("HOME").empty()         ? env("HOME") + "/.local/state"
                                                              : std::string("/var/lib");
      b.state_dir = base + "/gpugeek/slurm-bridge-" + o->cluster;
    } else {
      b.state_dir = o->state_dir;
    }
    b.partition = o->partition;
    b.capacity_type = o->capacity_type;
    b.slurm.url = o->slurmrestd.empty() ? env("SLURMRESTD_URL") : o->slurmrestd;
    b.slurm.api = o->api;
    b.slurm.user = o->slurm_user.empty() ? env("SLURMRESTD_USER") : o->slurm_user;
    b.slurm.token_file = o->slurm_token_file;
    if (b.slurm.token_file.empty()) b.slurm.token = env("SLURMRESTD_TOKEN");
    b.slurm.sbatch_timeout = std::chrono::seconds(10);
    if (b.slurm.url.empty()) Fail(cmd, "--slurmrestd: give slurmrestd's URL (or $SLURMRESTD_URL)", 2);
    for (const std::string& m : o->gpu_models) {
      const size_t eq = m.find('=');
      if (eq == std::string::npos || eq == 0 || eq + 1 == m.size()) {
        Fail(cmd, fmt::format("--gpu-model {}: expected TYPE=MODEL, e.g. a100=A100-SXM-80GB", m), 2);
      }
      b.gpu_models[m.substr(0, eq)] = m.substr(eq + 1);
    }
    if (!o->gpu_hour_price.empty()) {
      auto price = api::ParseMoneyMicros(o->gpu_hour_price);
      if (!price.ok() || *price > api::kMaxPriceMicrosPerGpuHour) {
        Fail(cmd, "--gpu-hour-price: a price of at most 1000 per GPU-hour, e.g. 0.85", 2);
      }
      b.price_micros_per_gpu_hour = *price;
    }
    auto bridge = backends::slurm::SlurmBridge::Create(b);
    if (!bridge.ok()) Fail(cmd, std::string(bridge.status().message()), 2);
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop, nullptr);
    spdlog::info("gpugeek slurm-bridge: cluster {} through {}", b.cluster, b.slurm.url);
    for (;;) {
      if (auto st = (*bridge)->Tick(); !st.ok()) {
        spdlog::warn("gpugeek slurm-bridge: {}", std::string(st.message()));
      }
      const auto interval = std::chrono::duration_cast<std::chrono::nanoseconds>((*bridge)->interval());
      timespec wait{static_cast<time_t>(interval.count() / 1'000'000'000),
                    static_cast<long>(interval.count() % 1'000'000'000)};
      const int sig = sigtimedwait(&stop, nullptr, &wait);
      if (sig == SIGINT || sig == SIGTERM) {
        spdlog::info("gpugeek slurm-bridge: {} received; cancelling the Slurm jobs it started",
                     sig == SIGINT ? "SIGINT" : "SIGTERM");
        (*bridge)->StopAll();
        return;
      }
    }
  });
}

}  // namespace gpugeek::cli

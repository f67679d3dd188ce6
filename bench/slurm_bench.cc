// Slurm through gpugeek's backend, against Slurm's own submission on the same cluster:
//   - sbatch: `sbatch --wrap true` back to back (Slurm's own path; its high-throughput guide documents
//     about 500 jobs/s sustained on a tuned controller), jobs/s;
//   - gpugeek: SlurmRest::Submit (sbatch pinned with --nodelist, --gres) back to back, jobs/s, and the
//     latency from submit to RUNNING as slurmrestd reports it (polled every 20 ms), p50 / p99.
// The cluster is named by the environment slurm-up.sh prints (SLURM_CONF, SLURMRESTD_URL, ...);
// bench/store_backends.sh starts one and runs this.
//
//   slurm_bench [--jobs N]   (default 200 for the rates, 20 for the latency)

#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "backends/slurm/rest_client.h"

namespace gpugeek::backends::slurm {
namespace {

using Clock = std::chrono::steady_clock;

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr ? v : "";
}

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

int Main(int argc, char** argv) {
  int jobs = 200;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::string(argv[i]) == "--jobs") jobs = std::max(1, std::atoi(argv[i + 1]));
  }
  RestOptions o;
  o.url = Env("SLURMRESTD_URL");
  o.api = Env("SLURMRESTD_API").empty() ? "v0.0.38" : Env("SLURMRESTD_API");
  o.user = Env("SLURMRESTD_USER");
  o.token = Env("SLURMRESTD_TOKEN");
  auto rest = SlurmRest::Create(o);
  if (!rest.ok() || Env("SLURM_CONF").empty()) {
    std::fprintf(stderr, "slurm_bench: give the cluster's environment (eval \"$(slurm-up.sh DIR)\"): %s\n",
                 rest.ok() ? "SLURM_CONF unset" : std::string(rest.status().message()).c_str());
    return 2;
  }
  auto nodes = (*rest)->Nodes();
  if (!nodes.ok() || nodes->empty()) {
    std::fprintf(stderr, "slurm_bench: no nodes: %s\n", std::string(nodes.status().message()).c_str());
    return 1;
  }
  const std::string workdir = Env("SLURM_JOB_DIR").empty() ? "/tmp" : Env("SLURM_JOB_DIR");

  // Slurm's own path.
  auto t0 = Clock::now();
  for (int i = 0; i < jobs; ++i) {
    const std::string cmd = "sbatch --parsable --output=/dev/null --chdir=" + workdir + " --wrap true >/dev/null";
    if (std::system(cmd.c_str()) != 0) {
      std::fprintf(stderr, "slurm_bench: sbatch failed\n");
      return 1;
    }
  }
  const double sbatch_rate = jobs / Seconds(Clock::now() - t0);

  // gpugeek's pinned path.
  GangJob g;
  g.job_id = "bench";
  g.nodes = {nodes->front().name};
  g.master_address = nodes->front().address.empty() ? "127.0.0.1" : nodes->front().address;
  g.gpu_type = nodes->front().gpus.empty() ? "" : nodes->front().gpus.front().type;
  g.gpus_per_node = nodes->front().gpus.empty() ? 0 : 1;
  g.workdir = workdir;
  g.command = {"/bin/true"};
  t0 = Clock::now();
  for (int i = 0; i < jobs; ++i) {
    g.epoch = i;
    auto id = (*rest)->Submit(g);
    if (!id.ok()) {
      std::fprintf(stderr, "slurm_bench: %s\n", std::string(id.status().message()).c_str());
      return 1;
    }
  }
  const double pinned_rate = jobs / Seconds(Clock::now() - t0);
  // Let the queue drain before timing latencies.
  std::system("while [ -n \"$(squeue -h -o %i)\" ]; do sleep 0.2; done");

  std::vector<double> latency;
  g.command = {"/bin/sleep", "2"};
  for (int i = 0; i < 20; ++i) {
    g.epoch = jobs + i;
    const auto start = Clock::now();
    auto id = (*rest)->Submit(g);
    if (!id.ok()) return 1;
    for (;;) {
      auto j = (*rest)->Job(*id);
      if (j.ok() && j->state != "PENDING") break;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    latency.push_back(Seconds(Clock::now() - start) * 1000);
    (void)(*rest)->Cancel(*id);
  }
  std::sort(latency.begin(), latency.end());
  std::printf("| path | jobs/s | submit -> RUNNING p50 | p99 |\n|---|---|---|---|\n");
  std::printf("| sbatch --wrap (Slurm's own) | %.0f | | |\n", sbatch_rate);
  std::printf("| gpugeek pinned (sbatch --nodelist --gres, state via slurmrestd) | %.0f | %.0f ms | %.0f ms |\n",
              pinned_rate, latency[latency.size() / 2], latency[latency.size() * 99 / 100]);
  std::printf("ratio pinned / sbatch: %.2f\n", pinned_rate / sbatch_rate);
  return 0;
}

}  // namespace
}  // namespace gpugeek::backends::slurm

int main(int argc, char** argv) { return gpugeek::backends::slurm::Main(argc, argv); }

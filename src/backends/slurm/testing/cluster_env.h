#pragma once
// What the tests against a real Slurm cluster share: the cluster's environment as
// scripts/slurm-test-cluster.sh wrote it (the file GPUGEEK_TEST_SLURM_ENV_FILE names; empty when unset), and a
// Slurm command's stdout.

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <string>

namespace gpugeek::backends::slurm::testing {

// "export NAME=value" lines -> {NAME: value}.
inline std::map<std::string, std::string> ClusterEnv() {
  std::map<std::string, std::string> env;
  const char* file = std::getenv("GPUGEEK_TEST_SLURM_ENV_FILE");
  if (file == nullptr) return env;
  std::ifstream in(file);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("export ", 0) != 0) continue;
    const size_t eq = line.find('=');
    if (eq != std::string::npos) env[line.substr(7, eq - 7)] = line.substr(eq + 1);
  }
  return env;
}

// `command`'s stdout without trailing newlines and spaces (SLURM_CONF from this process's environment).
inline std::string Shell(const std::string& command) {
  std::string out;
  FILE* p = popen(command.c_str(), "r");
  if (p == nullptr) return out;
  char buf[512];
  while (fgets(buf, sizeof buf, p) != nullptr) out += buf;
  pclose(p);
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  return out;
}

}  // namespace gpugeek::backends::slurm::testing

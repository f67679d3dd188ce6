#pragma once
// What the tests against real services (PostgreSQL, Slurm) share: whether this is CI, where a service missing
// must fail the test instead of skipping it, and the PostgreSQL server CTest's fixture `postgres` started.

#include <cstdlib>
#include <fstream>
#include <string>

namespace gpugeek::testing {

// CI=true: a service the tests need is part of the run, so its absence is a failure.
inline bool InCi() {
  const char* ci = std::getenv("CI");
  return ci != nullptr && std::string(ci) == "true";
}

// The test PostgreSQL server's URL: $GPUGEEK_TEST_POSTGRES_URL, else the first line of the file
// $GPUGEEK_TEST_POSTGRES_URL_FILE names (scripts/postgres-test-server.sh writes it); "" when neither is set.
inline std::string PostgresTestUrl() {
  if (const char* url = std::getenv("GPUGEEK_TEST_POSTGRES_URL"); url != nullptr && *url != '\0') return url;
  const char* file = std::getenv("GPUGEEK_TEST_POSTGRES_URL_FILE");
  if (file == nullptr || *file == '\0') return "";
  std::ifstream in(file);
  std::string url;
  std::getline(in, url);
  return url;
}

}  // namespace gpugeek::testing

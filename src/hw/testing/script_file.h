#pragma once
// Test helper: writes a fake-library script to a fresh file and points an environment variable
// at it for the life of the object.

#include <gtest/gtest.h>
#include <stdlib.h>

#include <atomic>
#include <fstream>
#include <string>

namespace gpugeek::hw::testing {

class ScriptFile {
 public:
  // Writes `text` and sets `env_var` to its path; unsets it again on destruction.
  ScriptFile(const std::string& env_var, const std::string& text) : env_var_(env_var) {
    static std::atomic<int> counter{0};
    path_ = ::testing::TempDir() + "gpugeek_fake_script_" + std::to_string(getpid()) + "_" + std::to_string(counter++) +
            ".txt";
    std::ofstream(path_) << text;
    setenv(env_var_.c_str(), path_.c_str(), 1);
  }
  ~ScriptFile() {
    unsetenv(env_var_.c_str());
    std::remove(path_.c_str());
  }
  const std::string& path() const { return path_; }

 private:
  std::string env_var_;
  std::string path_;
};

}  // namespace gpugeek::hw::testing

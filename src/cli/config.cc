#include "cli/config.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "common/file.h"
#include "common/status_macros.h"

namespace gpugeek::cli {
namespace {

// A config is a few profiles; anything bigger is not one.
constexpr uint64_t kMaxConfigBytes = 1 << 20;

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? std::string() : std::string(v);
}

}  // namespace

std::string ConfigPath() {
  if (std::string p = Env("GPUGEEK_CONFIG"); !p.empty()) return p;
  if (std::string x = Env("XDG_CONFIG_HOME"); !x.empty()) return x + "/gpugeek/config.yaml";
  std::string home = Env("HOME");
  if (home.empty()) home = ".";
  return home + "/.config/gpugeek/config.yaml";
}

absl::StatusOr<CliConfig> LoadConfig(const std::string& path) {
  CliConfig config;
  if (!std::filesystem::exists(path)) return config;
  ASSIGN_OR_RETURN(std::string text, ReadFileBounded(path, kMaxConfigBytes, "CLI config"));
  const auto bad = [&](const std::string& what) {
    return absl::InvalidArgumentError(
        fmt::format("CLI config {}: {}; fix it or run `gpugeek login SERVER` to write a new one", path, what));
  };
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    return bad(fmt::format("not YAML ({})", e.what()));
  }
  if (root.IsNull()) return config;
  if (!root.IsMap()) return bad("must be a mapping with `current` and `profiles`");
  try {
    if (root["current"]) config.current = root["current"].as<std::string>();
    if (YAML::Node profiles = root["profiles"]; profiles) {
      if (!profiles.IsMap()) return bad("profiles: must be a mapping of name -> {server, token_file, ca_file}");
      for (const auto& entry : profiles) {
        const std::string name = entry.first.as<std::string>();
        const YAML::Node& p = entry.second;
        if (!p.IsMap()) return bad(fmt::format("profiles.{}: must be a mapping", name));
        Profile profile;
        for (const auto& field : p) {
          const std::string key = field.first.as<std::string>();
          const std::string value = field.second.as<std::string>();
          if (key == "server") {
            profile.server = value;
          } else if (key == "token") {
            profile.token = value;
          } else if (key == "token_file") {
            profile.token_file = value;
          } else if (key == "ca_file") {
            profile.ca_file = value;
          } else {
            return bad(
                fmt::format("profiles.{}.{}: unknown field (known: server, token, token_file, ca_file)", name, key));
          }
        }
        config.profiles[name] = profile;
      }
    }
  } catch (const YAML::Exception& e) {
    return bad(fmt::format("a value is not a string ({})", e.what()));
  }
  return config;
}

absl::Status SaveConfig(const std::string& path, const CliConfig& config) {
  YAML::Emitter out;
  out << YAML::BeginMap << YAML::Key << "current" << YAML::Value << config.current;
  out << YAML::Key << "profiles" << YAML::Value << YAML::BeginMap;
  for (const auto& [name, p] : config.profiles) {
    out << YAML::Key << name << YAML::Value << YAML::BeginMap;
    out << YAML::Key << "server" << YAML::Value << p.server;
    if (!p.token.empty()) out << YAML::Key << "token" << YAML::Value << p.token;
    if (!p.token_file.empty()) out << YAML::Key << "token_file" << YAML::Value << p.token_file;
    if (!p.ca_file.empty()) out << YAML::Key << "ca_file" << YAML::Value << p.ca_file;
    out << YAML::EndMap;
  }
  out << YAML::EndMap << YAML::EndMap;
  std::error_code ec;
  const auto dir = std::filesystem::path(path).parent_path();
  if (!dir.empty()) std::filesystem::create_directories(dir, ec);
  if (ec) return absl::UnavailableError(fmt::format("cannot create {}: {}", dir.string(), ec.message()));
  return WriteFilePrivate(path, std::string(out.c_str()) + "\n");
}

absl::Status SaveProfile(const std::string& path, const std::string& name, const Profile& profile) {
  ASSIGN_OR_RETURN(CliConfig config, LoadConfig(path));
  config.profiles[name] = profile;
  config.current = name;
  return SaveConfig(path, config);
}

}  // namespace gpugeek::cli

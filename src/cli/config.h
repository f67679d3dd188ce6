#pragma once
// The CLI's config file: named profiles of (server URL, API token, CA certificate), so a command needs
// no --server or token once `gpugeek login` (or `gpugeek up`) has written one.
//
//   # $GPUGEEK_CONFIG, else $XDG_CONFIG_HOME/gpugeek/config.yaml, else ~/.config/gpugeek/config.yaml
//   current: local
//   profiles:
//     local:
//       server: https://127.0.0.1:8470
//       token_file: /home/me/.local/share/gpugeek/server/admin.token   # or token: ggk_...
//       ca_file: /home/me/.local/share/gpugeek/server/tls/ca.crt  # required for https; "" = plain http
//
// The file holds tokens, so it is written with mode 0600 (common/file.h WriteFilePrivate).
// What a command uses, first found wins:
//   server: --server, $GPUGEEK_SERVER, the profile's, http://127.0.0.1:8470
//   token:  --token, $GPUGEEK_TOKEN, the profile's token, the profile's token_file's first line
//   ca:     --ca-file, $GPUGEEK_CA_FILE, the profile's
//   profile: --profile, $GPUGEEK_PROFILE, `current`

#include <map>
#include <string>

#include "absl/status/statusor.h"

namespace gpugeek::cli {

struct Profile {
  std::string server;
  std::string token;
  std::string token_file;
  std::string ca_file;
};

struct CliConfig {
  std::string current;
  std::map<std::string, Profile> profiles;
};

// The config file's path (see above).
std::string ConfigPath();

// The config at `path`; an empty config when the file does not exist. InvalidArgument naming the file
// and the field for a malformed one (the file is not changed).
absl::StatusOr<CliConfig> LoadConfig(const std::string& path);

// Writes `config` to `path` (mode 0600, atomically), creating the folder.
absl::Status SaveConfig(const std::string& path, const CliConfig& config);

// Adds or replaces `name` and makes it current, keeping the other profiles; then saves.
absl::Status SaveProfile(const std::string& path, const std::string& name, const Profile& profile);

}  // namespace gpugeek::cli

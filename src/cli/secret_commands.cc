// Secrets and master keys (REST API of src/controlplane/secret_routes.h; keys: crypto/key_provider.h):
//   gpugeek secret set NAME [--from-file F]   the value from stdin (or the file), never from argv
//   gpugeek secrets                           names and times of your tenant's secrets, never values
//   gpugeek secret delete NAME
//   gpugeek keys init --key-file F            a new master key file (mode 0600)
//   gpugeek keys rotate [--retire]            online: POST /v1/keys/rotate on the server (admin)
//   gpugeek keys rotate --offline --key-file F --data-dir D [--retire]   with the server stopped
// The client ones take --server URL, --token, --profile and --json.
//
// Why never argv: a command line is readable by every user of the machine (/proc/PID/cmdline, ps) and
// lands in shell history; stdin and a file of mode 0600 are not.

#include <unistd.h>

#include <filesystem>
#include <iostream>
#include <iterator>

#include <fmt/format.h>

#include "cli/client.h"
#include "cli/commands.h"
#include "cli/config.h"
#include "common/file.h"
#include "common/table.h"
#include "controlplane/secrets.h"
#include "crypto/key_provider.h"
#include "crypto/keyring.h"

namespace gpugeek::cli {
namespace {

using nlohmann::json;

void RegisterSecret(CLI::App& app) {
  auto flags = std::make_shared<ClientFlags>();
  auto name = std::make_shared<std::string>();
  auto from_file = std::make_shared<std::string>();
  CLI::App* sub = app.add_subcommand("secret", "Set or delete a secret of your tenant (list them: gpugeek secrets)");
  sub->require_subcommand(1);
  CLI::App* set = sub->add_subcommand(
      "set",
      "Create or replace a secret; the value is read from stdin (or --from-file), never from the command line, "
      "which other users can read (ps) and shells keep in history. Specs use it as env: {VAR: {secret: NAME}}");
  set->add_option("name", *name, "Secret name, e.g. hf-token")->required();
  set->add_option("--from-file", *from_file, "Read the value from this file instead of stdin");
  AddClientFlags(set, flags.get());
  set->callback([flags, name, from_file] {
    const std::string cmd = "secret set";
    std::string value;
    if (!from_file->empty()) {
      absl::StatusOr<std::string> text =
          ReadFileBounded(*from_file, controlplane::kMaxSecretValueBytes, "secret value");
      if (!text.ok()) Fail(cmd, std::string(text.status().message()));
      value = std::move(*text);
    } else {
      if (::isatty(STDIN_FILENO)) std::cerr << "Value for secret " << *name << " (end with Ctrl-D):\n";
      value.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
    }
    // One trailing newline is the terminal's or echo's, not the value's.
    if (!value.empty() && value.back() == '\n') value.pop_back();
    if (!value.empty() && value.back() == '\r') value.pop_back();
    if (value.empty()) Fail(cmd, "the value is empty: pipe it on stdin or pass --from-file", kExitUsage);
    json s = OrFail(cmd, Connect(cmd, *flags)->Put("/v1/secrets/" + UrlEncode(*name), {{"value", value}}));
    if (flags->json) return PrintJson(s);
    std::cout << fmt::format("Set secret {} of tenant {}\n", Text(s["name"]), Text(s["tenant"]));
  });
  CLI::App* del = sub->add_subcommand("delete", "Delete a secret (jobs that refer to it no longer get it)");
  del->add_option("name", *name, "Secret name")->required();
  AddClientFlags(del, flags.get());
  del->callback([flags, name] {
    const std::string cmd = "secret delete";
    json s = OrFail(cmd, Connect(cmd, *flags)->Delete("/v1/secrets/" + UrlEncode(*name)));
    if (flags->json) return PrintJson(s);
    std::cout << "Deleted secret " << Text(s["name"]) << "\n";
  });
}

void RegisterSecrets(CLI::App& app) {
  auto flags = std::make_shared<ClientFlags>();
  CLI::App* sub = app.add_subcommand("secrets", "List your tenant's secrets (names and times; values are never shown)");
  AddClientFlags(sub, flags.get());
  sub->callback([flags] {
    const std::string cmd = "secrets";
    auto client = Connect(cmd, *flags);
    json all = json::array();
    std::string after;
    for (;;) {
      json page =
          OrFail(cmd, client->Get("/v1/secrets?limit=1000" + (after.empty() ? "" : "&after=" + UrlEncode(after))));
      for (json& item : page["secrets"]) all.push_back(std::move(item));
      if (page["next_after"].is_null()) break;
      after = page["next_after"].get<std::string>();
    }
    if (flags->json) return PrintJson({{"secrets", all}});
    TextTable table({"NAME", "CREATED", "UPDATED"});
    for (const json& s : all) {
      table.AddRow({Text(s["name"]), LocalTime(Text(s["created_at"])), LocalTime(Text(s["updated_at"]))});
    }
    std::cout << table.Render();
  });
}

void RegisterKeys(CLI::App& app) {
  struct Options {
    std::string key_file;
    std::string data_dir;
    bool offline = false;
    bool retire = false;
  };
  auto o = std::make_shared<Options>();
  auto flags = std::make_shared<ClientFlags>();
  CLI::App* sub = app.add_subcommand("keys", "Master keys that seal secrets, job specs and logs at rest");
  sub->require_subcommand(1);
  CLI::App* init = sub->add_subcommand("init", "Create a master key file (mode 0600); never overwrites one");
  init->add_option("--key-file", o->key_file, "Where to create it, e.g. /etc/gpugeek/master.key")->required();
  init->callback([o] {
    const std::string cmd = "keys init";
    absl::StatusOr<std::string> id = crypto::CreateMasterKeyFile(o->key_file);
    if (!id.ok()) Fail(cmd, std::string(id.status().message()));
    std::cout << fmt::format(
        "Created master key {} in {}. Back it up apart from the data: without it nothing sealed can be read. Start "
        "the server with --key-file {}\n",
        *id, o->key_file, o->key_file);
  });
  CLI::App* rotate = sub->add_subcommand(
      "rotate",
      "Rotate the master key: a new key in the key file, every data key re-wrapped (no data rewritten). Online "
      "through the server (admin), or --offline with the server stopped");
  rotate->add_flag("--offline", o->offline, "Rotate the files directly (the server must be stopped)");
  rotate->add_flag("--retire", o->retire, "Also remove the master keys no data key uses any more");
  rotate->add_option("--key-file", o->key_file, "With --offline: the key file (default <data-dir>/master.key)");
  rotate->add_option("--data-dir", o->data_dir, "With --offline: the server's data directory");
  AddClientFlags(rotate, flags.get());
  rotate->callback([o, flags] {
    const std::string cmd = "keys rotate";
    json done;
    if (!o->offline) {
      done = OrFail(cmd, Connect(cmd, *flags)->Post("/v1/keys/rotate", {{"retire", o->retire}}));
    } else {
      const std::filesystem::path data = o->data_dir.empty() ? DefaultDataDir() : o->data_dir;
      const std::string key_file = o->key_file.empty() ? (data / "master.key").string() : o->key_file;
      auto provider = crypto::FileKeyProvider::Open(key_file);
      if (!provider.ok()) Fail(cmd, std::string(provider.status().message()));
      // Keyring::Open takes the keyring's flock: a running server holds it, so this fails rather than race.
      auto keyring = crypto::Keyring::Open((data / "keyring.json").string(), **provider);
      if (!keyring.ok()) Fail(cmd, std::string(keyring.status().message()));
      auto rotated = crypto::RotateMasterKeyAndRewrap(**provider, **keyring, o->retire);
      if (!rotated.ok()) Fail(cmd, std::string(rotated.status().message()));
      done = {{"new_key_id", rotated->new_key_id}, {"rewrapped", rotated->rewrapped}, {"retired", rotated->retired}};
    }
    if (flags->json) return PrintJson(done);
    std::cout << fmt::format("Master key is now {}; {} data keys re-wrapped; {} old keys retired\n",
                             Text(done["new_key_id"]), done["rewrapped"].get<int64_t>(), done["retired"].size());
  });
}

}  // namespace

void RegisterSecretCommands(CLI::App& app) {
  RegisterSecret(app);
  RegisterSecrets(app);
  RegisterKeys(app);
}

}  // namespace gpugeek::cli

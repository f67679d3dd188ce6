// `gpugeek model watermark embed MODEL --key FILE [--out OUT] [--tensor NAME] [--bits 256] [--strength 0.5]`
// and `gpugeek model watermark detect MODEL --key FILE [--tensor NAME] [--bits 256]`: a keyed ownership mark in
// a safetensors model's weights (models/watermark.h). Needs `gpugeek model` (model_commands.cc) registered first.

#include <cmath>
#include <iostream>
#include <memory>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "common/file.h"
#include "models/watermark.h"

namespace gpugeek::cli {
namespace {

struct Options {
  std::string model;
  std::string key_file;
  std::string out;
  std::string tensor;
  int bits = 256;
  double strength = 0.5;
  bool json = false;
};

std::string Key(const Options& o) {
  absl::StatusOr<std::string> key = ReadFileBounded(o.key_file, 1 << 20, "watermark key");
  if (!key.ok() || key->empty()) {
    std::cerr << "gpugeek model watermark: --key " << o.key_file << ": "
              << (key.ok() ? std::string("empty") : std::string(key.status().message()))
              << "; make one with: head -c 32 /dev/urandom > mark.key\n";
    throw CLI::RuntimeError(2);
  }
  return *key;
}

nlohmann::json ReadingJson(const std::string& tensor, const models::WatermarkReading& r) {
  return {{"tensor", tensor},
          {"bits", r.bits},
          {"errors", r.errors},
          {"ber", r.ber},
          {"false_match", r.false_match},
          {"min_margin", r.min_margin}};
}

void PrintReading(const std::string& tensor, const models::WatermarkReading& r) {
  std::cout << fmt::format(
      "tensor {}: {} of {} bits differ (BER {:.4f}); an unmarked model reads this well with "
      "probability {:.3g}\n",
      tensor, r.errors, r.bits, r.ber, r.false_match);
}

void AddCommon(CLI::App* sub, const std::shared_ptr<Options>& o) {
  sub->add_option("model", o->model, "A .safetensors file")->required();
  sub->add_option("--key", o->key_file, "File of secret bytes (e.g. head -c 32 /dev/urandom > mark.key)")->required();
  sub->add_option("--tensor", o->tensor, "The tensor carrying the mark (default: the largest matrix)");
  sub->add_option("--bits", o->bits, "Bits in the mark (1..4096)");
  sub->add_flag("--json", o->json, "Print JSON");
}

}  // namespace

void RegisterWatermarkCommands(CLI::App& app) {
  CLI::App* wm = app.get_subcommand("model")->add_subcommand("watermark", "Embed or detect a keyed ownership mark");
  wm->require_subcommand(1);
  auto e = std::make_shared<Options>();
  CLI::App* embed = wm->add_subcommand("embed", "Mark a model's weights with a key");
  AddCommon(embed, e);
  embed->add_option("--out", e->out, "Where to write the marked model (default: MODEL.marked.safetensors)");
  embed->add_option("--strength", e->strength, "Margin of each bit, in units of the tensor's L2 norm");
  embed->callback([e] {
    std::string out = e->out.empty() ? e->model + ".marked.safetensors" : e->out;
    if (e->out.empty() && e->model.ends_with(".safetensors")) {
      out = e->model.substr(0, e->model.size() - 12) + ".marked.safetensors";
    }
    absl::StatusOr<models::FileEmbedResult> r =
        models::EmbedWatermarkInFile(e->model, out, Key(*e), e->tensor, {.bits = e->bits, .strength = e->strength});
    if (!r.ok()) {
      std::cerr << "gpugeek model watermark embed: " << r.status().message() << "\n";
      throw CLI::RuntimeError(1);
    }
    if (e->json) {
      nlohmann::json j = ReadingJson(r->tensor, r->result.after);
      j["out"] = out;
      j["relative_change"] = r->result.relative_change;
      j["sweeps"] = r->result.sweeps;
      std::cout << j.dump(2) << "\n";
      return;
    }
    std::cout << fmt::format("marked {} of {} ({:.3f}% relative change in L2, {} sweeps); wrote {}\n", r->tensor,
                             e->model, 100 * r->result.relative_change, r->result.sweeps, out);
    PrintReading(r->tensor, r->result.after);
  });
  auto d = std::make_shared<Options>();
  CLI::App* detect = wm->add_subcommand("detect", "Read a model's mark with a key");
  AddCommon(detect, d);
  detect->callback([d] {
    absl::StatusOr<models::FileReading> r = models::ReadWatermarkInFile(d->model, Key(*d), d->tensor, d->bits);
    if (!r.ok()) {
      std::cerr << "gpugeek model watermark detect: " << r.status().message() << "\n";
      throw CLI::RuntimeError(1);
    }
    if (d->json) {
      std::cout << ReadingJson(r->tensor, r->reading).dump(2) << "\n";
    } else {
      PrintReading(r->tensor, r->reading);
    }
  });
}

}  // namespace gpugeek::cli

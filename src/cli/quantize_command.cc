// `gpugeek quantize MODEL.safetensors|MODEL_DIR --to int8|int8-block32|int4-block32 [--out FILE] [--skip embeddings]
// [--skip NAME]... [--per-channel] [--json]`: weight-only quantisation of a model's matrices
// (models/quantize.h), with a report per tensor and for the model.

#include <cmath>
#include <filesystem>
#include <iostream>
#include <memory>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "absl/strings/str_join.h"
#include "cli/commands.h"
#include "common/table.h"
#include "common/units.h"
#include "models/quantize.h"

namespace gpugeek::cli {
namespace {

struct Options {
  std::string model;
  std::string to = "int8";
  std::string out;
  std::vector<std::string> skip;
  bool per_channel = false;
  bool json = false;
};

// MODEL.<scheme>.safetensors for a file; for a sharded model, the folder <model folder>-<scheme>.
std::string DefaultOut(const std::string& model, std::string_view scheme, bool sharded) {
  if (sharded) {
    std::filesystem::path dir = std::filesystem::is_directory(model) ? std::filesystem::path(model)
                                                                     : std::filesystem::path(model).parent_path();
    std::string d = std::filesystem::absolute(dir).lexically_normal().string();
    while (d.size() > 1 && d.back() == '/') d.pop_back();
    return fmt::format("{}-{}", d, scheme);
  }
  std::string base = model;
  if (base.ends_with(".safetensors")) base.resize(base.size() - std::string_view(".safetensors").size());
  return fmt::format("{}.{}.safetensors", base, scheme);
}

std::string Db(double db) { return std::isinf(db) ? "exact" : fmt::format("{:.1f}", db); }

nlohmann::json ReportJson(const models::QuantizeReport& r, const std::string& out) {
  nlohmann::json tensors = nlohmann::json::array();
  for (const models::TensorReport& t : r.tensors) {
    nlohmann::json j = {{"name", t.name},
                        {"shape", t.shape},
                        {"dtype", t.dtype},
                        {"bytes_before", t.bytes_before},
                        {"bytes_after", t.bytes_after}};
    if (t.scheme.empty()) {
      j["kept"] = t.kept_reason;
    } else {
      j["scheme"] = t.scheme;
      j["sqnr_db"] = std::isinf(t.sqnr_db) ? nlohmann::json(nullptr) : nlohmann::json(t.sqnr_db);
      j["max_abs_error"] = t.max_abs_error;
      j["max_scale"] = t.max_scale;
    }
    tensors.push_back(std::move(j));
  }
  return {{"out", out},
          {"scheme", r.scheme},
          {"bytes_before", r.bytes_before},
          {"bytes_after", r.bytes_after},
          {"reduction", r.Reduction()},
          {"quantised_bytes_before", r.quantised_bytes_before},
          {"quantised_bytes_after", r.quantised_bytes_after},
          {"tensors", tensors}};
}

void PrintReport(const models::QuantizeReport& r, const std::string& out) {
  TextTable t({"TENSOR", "SHAPE", "DTYPE", "SCHEME", "BEFORE", "AFTER", "SQNR dB", "MAX ERR", "KEPT BECAUSE"});
  for (size_t c = 4; c <= 7; ++c) t.AlignRight(c);
  for (const models::TensorReport& x : r.tensors) {
    bool kept = x.scheme.empty();
    t.AddRow({x.name, fmt::format("[{}]", absl::StrJoin(x.shape, ", ")), x.dtype, kept ? "-" : x.scheme,
              FormatBytes(x.bytes_before), FormatBytes(x.bytes_after), kept ? "-" : Db(x.sqnr_db),
              kept ? "-" : fmt::format("{:.3g}", x.max_abs_error), x.kept_reason});
  }
  std::cout << t.Render();
  double q = r.quantised_bytes_before == 0
                 ? 0.0
                 : 1.0 - static_cast<double>(r.quantised_bytes_after) / static_cast<double>(r.quantised_bytes_before);
  std::cout << fmt::format(
      "\nmodel: {} -> {} ({:.1f}% smaller); quantised tensors: {} -> {} ({:.1f}% smaller)\nwrote {}\n",
      FormatBytes(r.bytes_before), FormatBytes(r.bytes_after), 100.0 * r.Reduction(),
      FormatBytes(r.quantised_bytes_before), FormatBytes(r.quantised_bytes_after), 100.0 * q, out);
  std::cout << "Each element's error is at most half its scale (round to nearest; scales rounded up, nothing "
               "clips).\nPer-row int8 is 75% - 1/K smaller than fp32 for a tensor of K columns; block-32 stores "
               "8.5 (int8) or 4.5 (int4) bits per weight.\n";
}

}  // namespace

void RegisterQuantizeCommand(CLI::App& app) {
  auto o = std::make_shared<Options>();
  CLI::App* sub = app.add_subcommand("quantize", "Quantise a safetensors model's weight matrices to INT8 or INT4");
  sub->add_option("model", o->model,
                  "The model: a .safetensors file, or a sharded one (its model.safetensors.index.json or folder)")
      ->required();
  sub->add_option("--to", o->to,
                  "int8 (one fp32 scale per output row), int8-block32 or int4-block32 (fp16 scale "
                  "per 32 weights)");
  sub->add_option(
      "--out", o->out,
      "Where to write (default: MODEL.<scheme>.safetensors; for a sharded model the folder MODEL_DIR-<scheme>)");
  sub->add_option("--skip", o->skip,
                  "Keep in full precision: 'embeddings' (embedding tables) or tensors whose name contains this; "
                  "repeatable");
  sub->add_flag("--per-channel", o->per_channel, "One scale per output channel (what --to int8 does)");
  sub->add_flag("--json", o->json, "Print the report as JSON");
  sub->callback([o] {
    std::optional<models::QuantScheme> scheme = models::ParseScheme(o->to);
    if (!scheme) {
      std::cerr << "gpugeek quantize: --to " << o->to << ": unknown scheme; use int8, int8-block32 or int4-block32\n";
      throw CLI::RuntimeError(2);
    }
    if (o->per_channel && *scheme != models::QuantScheme::kInt8Row) {
      std::cerr << "gpugeek quantize: --per-channel: " << o->to
                << " scales per 32-weight block; drop --per-channel or use --to int8\n";
      throw CLI::RuntimeError(2);
    }
    models::QuantizeOptions options{.scheme = *scheme};
    for (const std::string& s : o->skip) {
      if (s == "embeddings") {
        options.skip_embeddings = true;
      } else {
        options.skip.push_back(s);
      }
    }
    bool sharded = std::filesystem::is_directory(o->model) || o->model.ends_with(".index.json");
    std::string out = o->out.empty() ? DefaultOut(o->model, o->to, sharded) : o->out;
    absl::StatusOr<models::QuantizeReport> report = sharded ? models::QuantizeShardedSafetensors(o->model, out, options)
                                                            : models::QuantizeSafetensors(o->model, out, options);
    if (!report.ok()) {
      std::cerr << "gpugeek quantize: " << report.status().message() << "\n";
      throw CLI::RuntimeError(1);
    }
    if (o->json) {
      std::cout << ReportJson(*report, out).dump(2) << "\n";
    } else {
      PrintReport(*report, out);
    }
  });
}

}  // namespace gpugeek::cli

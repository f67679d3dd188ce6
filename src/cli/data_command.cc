// `gpugeek data dedup PATH... [--threshold 0.8] [--ngram 5] [--unit word|char] [--bands B --rows R]
// [--seed 1] [--threads 0] [--max-bytes 4Gi] [--evaluate] [--out DIR] [--json]`: exact and near-duplicate
// documents among files (data/near_duplicates.h), each file one document. Without --bands and --rows they
// are chosen for the threshold (data::ChooseLsh, at most 128 hash functions). With --evaluate, the finder
// against brute-force exact Jaccard (data/dedup_eval.h). --out DIR writes duplicates.csv (every removed
// file, what it copies and the Jaccard index) and, with --evaluate, s_curve.csv and s_curve.svg.

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "api/quantity.h"
#include "cli/commands.h"
#include "cli/data_inputs.h"
#include "common/file.h"
#include "common/table.h"
#include "common/units.h"
#include "data/dedup_eval.h"
#include "data/near_duplicates.h"
#include "data/parallel.h"
#include "sim/report.h"

namespace gpugeek::cli {
namespace {

struct Options {
  std::vector<std::string> paths;
  data::NearDuplicateOptions dedup;
  std::string unit = "word";
  std::string max_bytes = "4Gi";
  bool evaluate = false;
  std::string out;
  bool json = false;
};

[[noreturn]] void Fail(const std::string& message) {
  std::cerr << "gpugeek data dedup: " << message << "\n";
  throw CLI::RuntimeError(2);
}

std::string CsvField(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

void WriteFileOrFail(const std::filesystem::path& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << bytes;
  f.close();
  if (!f) Fail(fmt::format("--out: cannot write {}", path.string()));
}

double Seconds(std::chrono::steady_clock::duration d) { return std::chrono::duration<double>(d).count(); }

nlohmann::json ScoreJson(const data::Score& s) {
  return {{"truth", s.truth},           {"found", s.found},     {"both", s.both},
          {"precision", s.precision()}, {"recall", s.recall()}, {"f1", s.f1()}};
}

void Run(const Options& o) {
  if (absl::Status st = data::ValidateNearDuplicateOptions(o.dedup); !st.ok()) Fail("--" + std::string(st.message()));
  absl::StatusOr<uint64_t> max_bytes = api::ParseBytes(o.max_bytes);
  if (!max_bytes.ok()) Fail(fmt::format("--max-bytes: {}", std::string(max_bytes.status().message())));

  absl::StatusOr<std::vector<std::string>> listed = ListInputFiles(o.paths);
  if (!listed.ok()) Fail(std::string(listed.status().message()));
  const std::vector<std::string>& files = *listed;
  std::vector<std::string> texts;
  texts.reserve(files.size());
  uint64_t total = 0;
  for (const std::string& f : files) {
    absl::StatusOr<std::string> text = ReadFileBounded(f, *max_bytes - total, "document");
    if (!text.ok()) {
      Fail(fmt::format("{}; the documents may hold {} in all (--max-bytes)", std::string(text.status().message()),
                       o.max_bytes));
    }
    total += text->size();
    texts.push_back(*std::move(text));
  }
  std::vector<std::string_view> views(texts.begin(), texts.end());

  const auto t0 = std::chrono::steady_clock::now();
  const std::vector<data::DocumentSketch> sketches =
      data::SketchDocuments(views, o.dedup, ProgressBar("sketching", ProgressBar::Unit::kCount, "documents"));
  const auto t1 = std::chrono::steady_clock::now();
  const data::NearDuplicateResult found = data::FindNearDuplicates(sketches, o.dedup.threshold);
  const auto t2 = std::chrono::steady_clock::now();
  std::optional<data::DedupEvaluation> eval;
  if (o.evaluate) eval = data::EvaluateNearDuplicates(sketches, found, o.dedup);
  const auto t3 = std::chrono::steady_clock::now();
  const double sketch_s = Seconds(t1 - t0), find_s = Seconds(t2 - t1);
  const double mb_per_s = total / 1e6 / std::max(1e-9, sketch_s + find_s);

  if (!o.out.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(o.out, ec);
    if (ec) Fail(fmt::format("--out {}: {}", o.out, ec.message()));
    std::string csv = "file,verdict,duplicate_of,jaccard\n";
    for (size_t d = 0; d < files.size(); ++d) {
      const data::DocumentVerdict& v = found.verdicts[d];
      if (v.verdict == data::Verdict::kKept) continue;
      csv += fmt::format("{},{},{},{:.4f}\n", CsvField(files[d]),
                         v.verdict == data::Verdict::kExactDuplicate ? "exact" : "near",
                         CsvField(files[v.duplicate_of]), v.jaccard);
    }
    WriteFileOrFail(std::filesystem::path(o.out) / "duplicates.csv", csv);
    if (eval) {
      std::string curve = "jaccard_lo,jaccard_hi,pairs,candidates,measured,theoretical\n";
      sim::Series measured{"measured", {}},
          theory{fmt::format("1-(1-J^{})^{}", o.dedup.lsh.rows, o.dedup.lsh.bands), {}};
      for (const data::JaccardBin& b : eval->s_curve) {
        curve += fmt::format("{:.2f},{:.2f},{},{},{:.6f},{:.6f}\n", b.lo, b.hi, b.pairs, b.candidates, b.measured(),
                             b.theoretical());
        if (b.pairs == 0) continue;
        measured.points.emplace_back((b.lo + b.hi) / 2, 100 * b.measured());
        theory.points.emplace_back((b.lo + b.hi) / 2, 100 * b.theoretical());
      }
      WriteFileOrFail(std::filesystem::path(o.out) / "s_curve.csv", curve);
      WriteFileOrFail(
          std::filesystem::path(o.out) / "s_curve.svg",
          sim::LineChartSvg(fmt::format("LSH candidates by exact Jaccard index ({} bands x {} rows)", o.dedup.lsh.bands,
                                        o.dedup.lsh.rows),
                            "exact Jaccard index", "pairs that became candidates, %", {measured, theory}, 0, 1));
    }
  }

  if (o.json) {
    nlohmann::json j = {{"documents", files.size()},
                        {"bytes", total},
                        {"kept", found.kept},
                        {"exact_duplicates", found.exact_duplicates},
                        {"near_duplicates", found.near_duplicates},
                        {"candidates_checked", found.candidates_checked},
                        {"candidates_rejected", found.candidates_rejected},
                        {"sketch_seconds", sketch_s},
                        {"find_seconds", find_s},
                        {"mb_per_s", mb_per_s}};
    if (eval) {
      nlohmann::json curve = nlohmann::json::array();
      for (const data::JaccardBin& b : eval->s_curve) {
        curve.push_back({{"lo", b.lo},
                         {"hi", b.hi},
                         {"pairs", b.pairs},
                         {"candidates", b.candidates},
                         {"measured", b.measured()},
                         {"theoretical", b.theoretical()}});
      }
      j["evaluation"] = {{"documents", eval->documents},
                         {"pairs", eval->pairs},
                         {"lsh_pairs", ScoreJson(eval->lsh_pairs)},
                         {"finder_pairs", ScoreJson(eval->finder_pairs)},
                         {"removed", ScoreJson(eval->removed)},
                         {"s_curve", curve},
                         {"seconds", Seconds(t3 - t2)}};
    }
    std::cout << j.dump(2) << "\n";
    return;
  }
  std::cout << fmt::format(
      "{} documents, {}: {} kept, {} exact duplicates, {} near duplicates (Jaccard >= {} over {} {}-grams)\n"
      "LSH {} bands x {} rows: a pair at Jaccard {} becomes a candidate with probability {:.4f}\n",
      files.size(), FormatBytes(total), found.kept, found.exact_duplicates, found.near_duplicates, o.dedup.threshold,
      o.unit, o.dedup.shingles.n, o.dedup.lsh.bands, o.dedup.lsh.rows, o.dedup.threshold,
      data::CandidateProbability(o.dedup.threshold, o.dedup.lsh.bands, o.dedup.lsh.rows));
  std::cout << fmt::format(
      "LSH candidates checked: {} ({} below the threshold); sketching {:.2f} s, finding {:.3f} s: {:.1f} MB/s on {} "
      "threads\n",
      found.candidates_checked, found.candidates_rejected, sketch_s, find_s, mb_per_s,
      data::WorkerCount(o.dedup.threads, files.size()));
  if (!eval) return;
  std::cout << fmt::format("\nAgainst brute force ({} distinct documents, {} pairs, {:.2f} s):\n", eval->documents,
                           eval->pairs, Seconds(t3 - t2));
  TextTable scores({"", "truth", "found", "both", "precision", "recall", "F1"});
  auto row = [&](const char* name, const data::Score& s) {
    scores.AddRow({name, std::to_string(s.truth), std::to_string(s.found), std::to_string(s.both),
                   fmt::format("{:.4f}", s.precision()), fmt::format("{:.4f}", s.recall()),
                   fmt::format("{:.4f}", s.f1())});
  };
  row("pairs, raw LSH candidates", eval->lsh_pairs);
  row("pairs, finder (checked)", eval->finder_pairs);
  row("documents removed", eval->removed);
  for (size_t c = 1; c < 7; ++c) scores.AlignRight(c);
  std::cout << scores.Render();
  std::cout << "\nS-curve: pairs that became LSH candidates, by exact Jaccard index\n";
  TextTable curve({"jaccard", "pairs", "candidates", "measured", "1-(1-J^r)^b"});
  for (const data::JaccardBin& b : eval->s_curve) {
    if (b.pairs == 0) continue;
    curve.AddRow({fmt::format("{:.2f}-{:.2f}", b.lo, b.hi), std::to_string(b.pairs), std::to_string(b.candidates),
                  fmt::format("{:.4f}", b.measured()), fmt::format("{:.4f}", b.theoretical())});
  }
  for (size_t c = 1; c < 5; ++c) curve.AlignRight(c);
  std::cout << curve.Render();
}

}  // namespace

void RegisterDataCommands(CLI::App& app) {
  CLI::App* data_cmd =
      app.add_subcommand("data", "Datasets: versions (push, log, diff, checkout, branch, tag), shards, duplicates");
  data_cmd->require_subcommand(1);
  RegisterDataShardCommands(data_cmd);
  RegisterDataVersionCommands(data_cmd);
  auto o = std::make_shared<Options>();
  CLI::App* dedup = data_cmd->add_subcommand(
      "dedup",
      "Exact and near-duplicate documents among files (each file one document), by MinHash LSH checked "
      "with the exact Jaccard index");
  dedup->add_option("paths", o->paths, "Files, or folders whose files (recursively) are the documents")->required();
  AddDedupOptions(dedup, o->dedup, o->unit);
  dedup->add_option("--max-bytes", o->max_bytes, "Most bytes of documents read in all")->capture_default_str();
  dedup->add_flag("--evaluate", o->evaluate,
                  "Also compare every pair by exact Jaccard index (brute force, O(n^2)): precision, recall, S-curve");
  dedup->add_option("--out", o->out, "Folder for duplicates.csv (and s_curve.csv, s_curve.svg with --evaluate)");
  dedup->add_flag("--json", o->json, "Print JSON");
  dedup->callback([o] {
    Options options = *o;
    if (absl::Status st = FinishDedupOptions(options.dedup, options.unit); !st.ok()) Fail(std::string(st.message()));
    Run(options);
  });
}

}  // namespace gpugeek::cli

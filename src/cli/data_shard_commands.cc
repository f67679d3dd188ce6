// `gpugeek data shard PATH... --out DIR [--shard-size 64Mi] [--records file|line] [--json]`: writes the
// files (each file one record, or each line one record) into a sharded dataset folder (data/shard_writer.h).
// `gpugeek data order --index DIR --world W --rank R --seed S --epoch E [--consumed C] [--policy pad|drop]
// [--window-shards 4] [--json]`: the samples rank R reads in that epoch from that position
// (data/sampler.h), the list examples/gpt/gpugeek_data.py computes too.

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <limits>
#include <memory>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "api/quantity.h"
#include "cli/commands.h"
#include "cli/data_inputs.h"
#include "common/file.h"
#include "common/units.h"
#include "data/sampler.h"
#include "data/shard_format.h"
#include "data/shard_writer.h"

namespace gpugeek::cli {
namespace {

[[noreturn]] void Fail(const char* command, const std::string& message) {
  std::cerr << "gpugeek data " << command << ": " << message << "\n";
  throw CLI::RuntimeError(2);
}

struct ShardOptions {
  std::vector<std::string> paths;
  std::string out;
  std::string shard_size = "64Mi";
  std::string records = "file";
  bool json = false;
};

void RunShard(const ShardOptions& o) {
  absl::StatusOr<uint64_t> shard_bytes = api::ParseBytes(o.shard_size);
  if (!shard_bytes.ok()) Fail("shard", fmt::format("--shard-size: {}", std::string(shard_bytes.status().message())));
  absl::StatusOr<std::vector<std::string>> listed = ListInputFiles(o.paths);
  if (!listed.ok()) Fail("shard", std::string(listed.status().message()));
  const std::vector<std::string>& files = *listed;
  auto writer = data::ShardWriter::Create({.dir = o.out, .shard_bytes = *shard_bytes});
  if (!writer.ok()) Fail("shard", fmt::format("--out: {}", std::string(writer.status().message())));
  const ProgressBar bar("sharding", ProgressBar::Unit::kCount, "files");
  const auto t0 = std::chrono::steady_clock::now();
  uint64_t input_bytes = 0;
  for (size_t i = 0; i < files.size(); ++i) {
    absl::StatusOr<std::string> text = ReadFileBounded(files[i], std::numeric_limits<uint64_t>::max(), "input");
    if (!text.ok()) Fail("shard", std::string(text.status().message()));
    input_bytes += text->size();
    absl::Status st;
    if (o.records == "file") {
      st = (*writer)->Add(*text);
    } else {
      // Each line without its '\n'; a last line without one counts, an empty file has no lines.
      std::string_view rest = *text;
      while (st.ok() && !rest.empty()) {
        const size_t nl = rest.find('\n');
        st = (*writer)->Add(rest.substr(0, nl));
        rest.remove_prefix(nl == std::string_view::npos ? rest.size() : nl + 1);
      }
    }
    if (!st.ok()) Fail("shard", std::string(st.message()));
    bar(i + 1, files.size());
  }
  absl::StatusOr<data::ShardIndex> index = (*writer)->Finish();
  if (!index.ok()) Fail("shard", std::string(index.status().message()));
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double mb_per_s = input_bytes / 1e6 / std::max(1e-9, seconds);
  if (o.json) {
    std::cout << nlohmann::json{{"out", o.out},
                                {"files", files.size()},
                                {"shards", index->shards.size()},
                                {"records", index->total_records},
                                {"input_bytes", input_bytes},
                                {"bytes", index->total_bytes},
                                {"seconds", seconds},
                                {"mb_per_s", mb_per_s}}
                     .dump(2)
              << "\n";
    return;
  }
  std::cout << fmt::format(
      "{} records from {} files ({}) in {} shards of at most {} ({}) in {}; {:.2f} s, {:.1f} MB/s\n",
      index->total_records, files.size(), FormatBytes(input_bytes), index->shards.size(), FormatBytes(*shard_bytes),
      FormatBytes(index->total_bytes), o.out, seconds, mb_per_s);
}

struct OrderOptions {
  std::string index;
  uint32_t world = 1;
  uint32_t rank = 0;
  uint64_t seed = 0;
  uint64_t epoch = 0;
  uint64_t consumed = 0;
  std::string policy = "pad";
  uint32_t window_shards = data::kDefaultWindowShards;
  bool json = false;
};

void RunOrder(const OrderOptions& o) {
  const std::string path = (std::filesystem::path(o.index) / data::kShardIndexFile).string();
  absl::StatusOr<std::string> text = ReadFileBounded(path, uint64_t{64} << 20, "shard index");
  if (!text.ok()) Fail("order", fmt::format("--index: {}", std::string(text.status().message())));
  absl::StatusOr<data::ShardIndex> index = data::ParseShardIndex(*text);
  if (!index.ok()) Fail("order", fmt::format("--index {}: {}", o.index, std::string(index.status().message())));
  absl::StatusOr<data::RemainderPolicy> policy = data::ParseRemainderPolicy(o.policy);
  if (!policy.ok()) Fail("order", fmt::format("--policy: {}", std::string(policy.status().message())));
  const std::vector<uint64_t> order = data::EpochOrder(index->RecordCounts(), o.seed, o.epoch, o.window_shards);
  absl::StatusOr<std::vector<data::RankSample>> samples =
      data::RankSamples(order, o.consumed, o.world, o.rank, *policy);
  if (!samples.ok()) Fail("order", std::string(samples.status().message()));
  if (o.json) {
    nlohmann::json ids = nlohmann::json::array(), pads = nlohmann::json::array();
    for (const data::RankSample& s : *samples) {
      ids.push_back(s.sample);
      pads.push_back(s.is_padding);
    }
    std::cout << nlohmann::json{{"records", index->total_records},
                                {"world", o.world},
                                {"rank", o.rank},
                                {"seed", o.seed},
                                {"epoch", o.epoch},
                                {"consumed", o.consumed},
                                {"policy", o.policy},
                                {"window_shards", o.window_shards},
                                {"count", samples->size()},
                                {"samples", ids},
                                {"is_padding", pads}}
                     .dump()
              << "\n";
    return;
  }
  for (const data::RankSample& s : *samples) std::cout << s.sample << (s.is_padding ? " pad\n" : "\n");
}

}  // namespace

void RegisterDataShardCommands(CLI::App* data_cmd) {
  auto so = std::make_shared<ShardOptions>();
  CLI::App* shard = data_cmd->add_subcommand(
      "shard", "Write files into a sharded dataset folder: shard-00000.bin, ... and index.json (with SHA-256s)");
  shard->add_option("paths", so->paths, "Files, or folders whose files (recursively, sorted) are read")->required();
  shard->add_option("--out", so->out, "Dataset folder to create (must not hold an index.json)")->required();
  shard->add_option("--shard-size", so->shard_size, "Most bytes per shard file, footer included (64Mi, 1GB, ...)")
      ->capture_default_str();
  shard->add_option("--records", so->records, "What one record is: a whole file, or one line (without its newline)")
      ->check(CLI::IsMember({"file", "line"}))
      ->capture_default_str();
  shard->add_flag("--json", so->json, "Print a JSON summary");
  shard->callback([so] { RunShard(*so); });

  auto oo = std::make_shared<OrderOptions>();
  CLI::App* order = data_cmd->add_subcommand(
      "order", "The samples one data-parallel rank reads in an epoch, from a position (data/sampler.h)");
  order->add_option("--index", oo->index, "Dataset folder (its index.json)")->required();
  order->add_option("--world", oo->world, "Number of ranks")->required();
  order->add_option("--rank", oo->rank, "This rank, in [0, world)")->required();
  order->add_option("--seed", oo->seed, "Seed of the order")->capture_default_str();
  order->add_option("--epoch", oo->epoch, "Epoch")->capture_default_str();
  order->add_option("--consumed", oo->consumed, "Entries of the epoch's order already taken by all ranks together")
      ->capture_default_str();
  order->add_option("--policy", oo->policy, "Remainder policy: pad (flagged repeats) or drop")->capture_default_str();
  order->add_option("--window-shards", oo->window_shards, "Shards whose samples are shuffled together")
      ->capture_default_str();
  order->add_flag("--json", oo->json, "Print JSON");
  order->callback([oo] { RunOrder(*oo); });
}

}  // namespace gpugeek::cli

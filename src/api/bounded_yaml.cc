#include "api/bounded_yaml.h"

#include <yaml-cpp/eventhandler.h>

#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/core.h>

#include "common/quote.h"
#include "common/status_macros.h"

namespace gpugeek::api {
namespace {

// Limits on the YAML itself, checked before the schema is read. A real spec is a few KiB with a few
// dozen values, nested three levels; the limits leave orders of magnitude of room.
constexpr size_t kMaxSpecBytes = size_t{1} << 20;
// yaml-cpp 0.7 loads an alias (*name) as one more reference to the anchored node, so loading is linear
// but a walk visits the anchored subtree once per reference: nine levels of nine aliases (a 342-byte
// "billion laughs") are 9^9 visits. Every walk is bounded by this count of visited values.
constexpr int kMaxVisitedValues = 100'000;
constexpr int kMaxYamlDepth = 64;  // mappings and lists open at once
// yaml-cpp's scanner keeps every token of an unclosed flow collection ('[', '{') queued until it closes,
// about 280 bytes each: a 1 MiB spec of 500,000 nested '[' held 137 MiB before its parser refused the
// depth. Counting every '[' and '{' byte, wherever it stands, is an upper bound on that nesting that no
// quoting can hide; 10,000 of them cost the scanner at most about 3 MiB. A real spec has a few dozen.
constexpr int kMaxFlowOpeners = 10'000;

// Whether the YAML stream has a second document with anything in it (a trailing `---` adds an empty
// one, which is fine). Reads the first two documents only.
class ContentProbe final : public YAML::EventHandler {
 public:
  bool content = false;
  void OnDocumentStart(const YAML::Mark&) override {}
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override { content = true; }
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t, const std::string&) override { content = true; }
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {
    content = true;
  }
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {
    content = true;
  }
  void OnMapEnd() override {}
};

// Counts the values of the first document as its events stream past, without building a tree: yaml-cpp
// builds about 450 bytes per loaded value (a 1 MiB flow list of 500,000 items took 225 MiB and 1.1 s to
// load, and only then did TreeCheck refuse it), while this pass holds only the scanner's state. Values
// are counted as TreeCheck counts them (the root, each list item and each mapping value; not plain
// keys; an alias once), so it refuses nothing TreeCheck would accept. Nesting is the number of
// collections open at once.
class ValueCounter final : public YAML::EventHandler {
 public:
  int values = 0;
  int max_depth = 0;
  int deepest_line = 0;  // 1-based line of the first collection opened at max_depth

  void OnDocumentStart(const YAML::Mark&) override {}
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override { Node(); }
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override { Node(); }
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t, const std::string&) override { Node(); }
  void OnSequenceStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {
    Open(mark, false);
  }
  void OnSequenceEnd() override { open_.pop_back(); }
  void OnMapStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {
    Open(mark, true);
  }
  void OnMapEnd() override { open_.pop_back(); }

 private:
  struct Level {
    bool map;
    bool next_is_key;
  };
  // A node starts in the innermost open collection: a mapping's children alternate key, value.
  void Node() {
    const bool key = !open_.empty() && open_.back().map && open_.back().next_is_key;
    if (!open_.empty() && open_.back().map) open_.back().next_is_key = !open_.back().next_is_key;
    if (!key) ++values;
  }
  void Open(const YAML::Mark& mark, bool map) {
    Node();
    open_.push_back({map, true});
    if (static_cast<int>(open_.size()) > max_depth) {
      max_depth = static_cast<int>(open_.size());
      deepest_line = mark.line + 1;
    }
  }
  std::vector<Level> open_;
};

// Before yaml-cpp builds a tree: the values and nesting of the first document within TreeCheck's limits
// (same messages), and no second document with content. Throws what yaml-cpp throws on malformed YAML.
absl::Status CheckDocumentsBeforeLoading(const std::string& text, std::string_view what, std::string_view unit) {
  std::istringstream in(text);
  YAML::Parser parser(in);
  ValueCounter first;
  if (!parser.HandleNextDocument(first)) return absl::OkStatus();
  if (first.values > kMaxVisitedValues) {
    return absl::InvalidArgumentError(
        fmt::format("spec: the YAML holds more than {} values, each alias (*name) counting as a copy of what it names; "
                    "use fewer aliases or write a smaller spec",
                    kMaxVisitedValues));
  }
  if (first.max_depth > kMaxYamlDepth) {
    return absl::InvalidArgumentError(fmt::format("spec: the YAML nests deeper than {} levels (line {}); flatten it",
                                                  kMaxYamlDepth, first.deepest_line));
  }
  // One job per spec: a second document (after `---`) would otherwise be dropped without a word.
  // At most two documents are read, whatever follows (LoadAll on 10,000 `---` takes seconds).
  ContentProbe second;
  if (parser.HandleNextDocument(second) && second.content) {
    return absl::InvalidArgumentError(
        fmt::format("{} holds more than one YAML document (separated by ---); submit one {} per file", what, unit));
  }
  return absl::OkStatus();
}

// Walks the whole loaded tree once, before the schema reads any of it:
//  - bounds the work: InvalidArgument once more than kMaxVisitedValues values (or kMaxVisitedKeyBytes
//    bytes of keys) are visited, aliases counting once per reference, so an alias bomb stops here after
//    a bounded number of steps; or once the tree nests deeper than kMaxYamlDepth (a self-referencing
//    alias, `a: &a [*a]`, is infinitely deep);
//  - YAML 1.2 requires the keys of a mapping to be unique, but yaml-cpp keeps both pairs and lookups
//    see only the first: a spec saying `priority` twice would silently lose one. InvalidArgument naming
//    the key, its path and both lines.
// Paths are rendered only for a message: building one per visited value would copy long keys once per
// alias reference.
class TreeCheck {
 public:
  explicit TreeCheck(std::string_view what) : what_(what) {}
  absl::Status Check(const YAML::Node& node, int depth) {
    if (++visited_ > kMaxVisitedValues) {
      return absl::InvalidArgumentError(fmt::format(
          "spec: the YAML holds more than {} values, each alias (*name) counting as a copy of what it names; "
          "use fewer aliases or write a smaller spec",
          kMaxVisitedValues));
    }
    if (!(node.IsMap() || node.IsSequence())) return absl::OkStatus();
    if (depth >= kMaxYamlDepth) {
      return absl::InvalidArgumentError(fmt::format("spec: the YAML nests deeper than {} levels (line {}); flatten it",
                                                    kMaxYamlDepth, node.Mark().line + 1));
    }
    // Keys live in the loaded document, which outlives the walk.
    std::map<std::string_view, int> lines;
    int index = 0;
    for (const auto& item : node) {
      if (node.IsSequence()) {
        path_.push_back({{}, index++});
        RETURN_IF_ERROR(Check(item, depth + 1));
        path_.pop_back();
        continue;
      }
      if (!item.first.IsScalar()) {  // refused by the schema; still bounded here
        RETURN_IF_ERROR(Check(item.first, depth + 1));
        RETURN_IF_ERROR(Check(item.second, depth + 1));
        continue;
      }
      const std::string& key = item.first.Scalar();
      key_bytes_ += key.size();
      if (key_bytes_ > kMaxVisitedKeyBytes) {
        return absl::InvalidArgumentError(fmt::format(
            "spec: the YAML holds more than {} bytes of keys once its aliases (*name) are expanded; use fewer "
            "aliases or shorter keys",
            kMaxVisitedKeyBytes));
      }
      path_.push_back({key, -1});
      const int line = item.first.Mark().line + 1;
      if (auto [it, inserted] = lines.emplace(key, line); !inserted) {
        return absl::InvalidArgumentError(fmt::format("{}: the key appears twice in the {} (lines {} and {}); keep one",
                                                      Path(), what_, it->second, line));
      }
      RETURN_IF_ERROR(Check(item.second, depth + 1));
      path_.pop_back();
    }
    return absl::OkStatus();
  }

 private:
  // 8x the largest spec: only aliases can reach it.
  static constexpr size_t kMaxVisitedKeyBytes = 8 * kMaxSpecBytes;

  struct Step {
    std::string_view key;  // a mapping's key, or
    int index;             // a list's index (key empty)
  };

  // "resources.accelerators", "a[2].b"; each key shown at most 64 bytes, escaped.
  std::string Path() const {
    std::string out;
    for (const Step& s : path_) {
      if (s.index >= 0) {
        out += fmt::format("[{}]", s.index);
        continue;
      }
      if (!out.empty()) out += '.';
      out += s.key.size() <= 64 ? EscapeForMessage(s.key) : EscapeForMessage(s.key.substr(0, 64)) + "...";
    }
    return out;
  }

  std::string_view what_;
  int visited_ = 0;
  size_t key_bytes_ = 0;
  std::vector<Step> path_;
};

}  // namespace

absl::StatusOr<YAML::Node> LoadBoundedYaml(std::string_view yaml_text, std::string_view what, std::string_view unit) {
  if (yaml_text.size() > kMaxSpecBytes) {
    return absl::InvalidArgumentError(fmt::format(
        "spec: {} bytes is over the 1 MiB limit; keep large data in files the job reads", yaml_text.size()));
  }
  int flow_openers = 0;
  for (char c : yaml_text) flow_openers += (c == '[' || c == '{') ? 1 : 0;
  if (flow_openers > kMaxFlowOpeners) {
    return absl::InvalidArgumentError(
        fmt::format("spec: the YAML has {} '[' and '{{' characters; at most {} are allowed (flow collections nest "
                    "at most {} levels): write a smaller spec",
                    flow_openers, kMaxFlowOpeners, kMaxYamlDepth));
  }
  YAML::Node doc;
  try {
    const std::string text(yaml_text);
    RETURN_IF_ERROR(CheckDocumentsBeforeLoading(text, what, unit));
    doc = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(
        fmt::format("{} is not valid YAML (line {}, column {}): {}", what, e.mark.line + 1, e.mark.column + 1, e.msg));
  }
  try {
    RETURN_IF_ERROR(TreeCheck(what).Check(doc, 0));
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(fmt::format("{}: {}", what, e.what()));
  }
  return doc;
}

}  // namespace gpugeek::api

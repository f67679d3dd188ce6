#pragma once
// Ignore rules: which files of a workdir stay out of its archive, read from `.gitignore` and
// `.gpugeekignore` files in any folder of the tree, with the common subset of gitignore(5):
//
//   # comment              blank lines and lines starting with '#' are skipped (`\#` is a literal '#')
//   *.pyc                  `*` any run of characters but '/', `?` one character but '/'
//   build/                 a trailing '/' matches folders only
//   /data                  a leading '/' (or any '/' but a trailing one) anchors the pattern to the
//                          folder of the file that holds it; otherwise it matches a name at any depth
//   **/logs, logs/**, a/**/b   `**` spans folders: any leading folders, everything inside, zero or more
//   !keep.pyc              negation: re-includes what an earlier rule excluded (not inside an
//                          excluded folder: that folder is never read, as git does)
//
// The last rule that matches a path decides. Rules of a folder's own files come after those of its
// parents, and `.gpugeekignore`'s after `.gitignore`'s of the same folder, so they win. Not supported:
// character classes (`[a-z]` is literal text), and trailing spaces are dropped even when escaped.
// Matching costs O(pattern length x path length) at worst (a set of positions, no backtracking).

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace gpugeek::archive {

struct IgnoreRule {
  enum class Op { kLiteral, kAnyChar, kStar, kAnything, kDirs };  // kDirs: "(.*/)?", see PushDirs
  struct Token {
    Op op = Op::kLiteral;
    char c = 0;
  };
  std::string pattern;  // the line as written, for messages
  std::string base;     // folder of the ignore file, relative to the root ("" = the root); no trailing '/'
  bool negate = false;
  bool dir_only = false;
  std::vector<Token> tokens;  // compiled, relative to `base`
};

// Lines longer than this are skipped (no real pattern is that long; it bounds matching cost).
inline constexpr size_t kMaxIgnorePatternBytes = 4096;

// The rules of one ignore file found in folder `base` ("" = the root, else "a/b"). Never fails: a line
// that is not a rule (blank, comment, too long, only "!" or "/") is skipped.
std::vector<IgnoreRule> ParseIgnoreRules(std::string_view text, std::string_view base);

// Whether `rule` matches `path` (relative to the root, '/'-separated, no leading or trailing '/').
bool RuleMatches(const IgnoreRule& rule, std::string_view path, bool is_dir);

// Whether `path` is excluded by `rules` (in order; the last match decides). Nothing matches: false.
bool IsIgnored(const std::vector<IgnoreRule>& rules, std::string_view path, bool is_dir);

}  // namespace gpugeek::archive

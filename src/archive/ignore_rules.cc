#include "archive/ignore_rules.h"

#include <algorithm>

namespace gpugeek::archive {
namespace {

using Op = IgnoreRule::Op;
using Token = IgnoreRule::Token;

// "(.*/)?": zero folders (kDirs jumps over the next two tokens), or any characters and a '/'.
void PushDirs(std::vector<Token>& out) {
  out.push_back({Op::kDirs, 0});
  out.push_back({Op::kAnything, 0});
  out.push_back({Op::kLiteral, '/'});
}

std::vector<Token> Compile(std::string_view p, bool anchored) {
  std::vector<Token> out;
  // An unanchored pattern matches a name at any depth: it behaves as "**/" + pattern.
  if (!anchored) PushDirs(out);
  for (size_t i = 0; i < p.size(); ++i) {
    const char c = p[i];
    if (c == '\\' && i + 1 < p.size()) {
      out.push_back({Op::kLiteral, p[++i]});
    } else if (c == '*' && i + 1 < p.size() && p[i + 1] == '*') {
      const bool at_start = i == 0 || p[i - 1] == '/';
      const bool slash_after = i + 2 < p.size() && p[i + 2] == '/';
      const bool at_end = i + 2 == p.size();
      if (at_start && slash_after) {  // "**/": zero or more leading folders
        PushDirs(out);
        i += 2;
      } else if (at_start && at_end) {  // "/**" or a lone "**": everything
        out.push_back({Op::kAnything, 0});
        i += 1;
      } else {  // "a**b": two ordinary stars
        out.push_back({Op::kStar, 0});
        i += 1;
      }
    } else if (c == '*') {
      out.push_back({Op::kStar, 0});
    } else if (c == '?') {
      out.push_back({Op::kAnyChar, 0});
    } else {
      out.push_back({Op::kLiteral, c});
    }
  }
  return out;
}

// Adds state `t` and what it reaches without consuming a character.
void Close(const std::vector<Token>& tokens, size_t t, std::vector<char>& states) {
  while (t <= tokens.size() && !states[t]) {
    states[t] = 1;
    if (t == tokens.size()) return;
    const Op op = tokens[t].op;
    if (op == Op::kDirs) {
      // (.*/)? : skip it entirely, or go on to ".*/".
      Close(tokens, t + 3, states);
      ++t;
    } else if (op == Op::kStar || op == Op::kAnything) {
      ++t;
    } else {
      return;
    }
  }
}

bool Match(const std::vector<Token>& tokens, std::string_view s) {
  std::vector<char> now(tokens.size() + 1, 0), next(tokens.size() + 1, 0);
  Close(tokens, 0, now);
  for (char c : s) {
    std::fill(next.begin(), next.end(), 0);
    bool any = false;
    for (size_t t = 0; t < tokens.size(); ++t) {
      if (!now[t]) continue;
      const Token& k = tokens[t];
      switch (k.op) {
        case Op::kLiteral:
          if (k.c == c) Close(tokens, t + 1, next), any = true;
          break;
        case Op::kAnyChar:
          if (c != '/') Close(tokens, t + 1, next), any = true;
          break;
        case Op::kStar:
          if (c != '/') Close(tokens, t, next), any = true;
          break;
        case Op::kAnything:
          Close(tokens, t, next), any = true;
          break;
        case Op::kDirs:  // consumes nothing itself
          break;
      }
    }
    if (!any) return false;
    now.swap(next);
  }
  return now[tokens.size()] != 0;
}

}  // namespace

std::vector<IgnoreRule> ParseIgnoreRules(std::string_view text, std::string_view base) {
  std::vector<IgnoreRule> rules;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(start, end - start);
    start = end + 1;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    while (!line.empty() && line.back() == ' ') line.remove_suffix(1);
    if (line.empty() || line.front() == '#' || line.size() > kMaxIgnorePatternBytes) continue;
    IgnoreRule rule;
    rule.pattern = std::string(line);
    rule.base = std::string(base);
    if (line.front() == '!') {
      rule.negate = true;
      line.remove_prefix(1);
    } else if (line.size() >= 2 && line[0] == '\\' && (line[1] == '!' || line[1] == '#')) {
      line.remove_prefix(1);  // a literal '!' or '#' is the pattern's first character
    }
    if (!line.empty() && line.back() == '/') {
      rule.dir_only = true;
      while (!line.empty() && line.back() == '/') line.remove_suffix(1);
    }
    const bool anchored = line.find('/') != std::string_view::npos;
    while (!line.empty() && line.front() == '/') line.remove_prefix(1);
    if (line.empty()) continue;
    rule.tokens = Compile(line, anchored);
    rules.push_back(std::move(rule));
    if (end == text.size()) break;
  }
  return rules;
}

bool RuleMatches(const IgnoreRule& rule, std::string_view path, bool is_dir) {
  if (rule.dir_only && !is_dir) return false;
  if (!rule.base.empty()) {
    if (path.size() <= rule.base.size() + 1 || path.substr(0, rule.base.size()) != rule.base ||
        path[rule.base.size()] != '/') {
      return false;
    }
    path.remove_prefix(rule.base.size() + 1);
  }
  return Match(rule.tokens, path);
}

bool IsIgnored(const std::vector<IgnoreRule>& rules, std::string_view path, bool is_dir) {
  for (auto it = rules.rbegin(); it != rules.rend(); ++it) {
    if (RuleMatches(*it, path, is_dir)) return !it->negate;
  }
  return false;
}

}  // namespace gpugeek::archive

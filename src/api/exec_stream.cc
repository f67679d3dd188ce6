#include "api/exec_stream.h"

#include <cstdlib>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "api/json_reader.h"
#include "common/status_macros.h"

namespace gpugeek::api {
namespace {

constexpr size_t kMaxHeaderBytes = 32;  // "stderr 1048576\n" is 15

const char* TagOf(ExecStream s) {
  switch (s) {
    case ExecStream::kStdout:
      return "stdout";
    case ExecStream::kStderr:
      return "stderr";
    case ExecStream::kExit:
      return "exit";
  }
  return "exit";
}

}  // namespace

int ExecExit::ShellStatus() const {
  if (exit_code) return *exit_code;
  if (signal) return 128 + *signal;
  return 1;
}

std::string EncodeExecFrame(ExecStream stream, const std::string& payload) {
  if (payload.size() > kMaxExecFrameBytes) {
    std::fprintf(stderr, "EncodeExecFrame: a payload of %zu bytes is over the frame limit\n", payload.size());
    std::abort();
  }
  return fmt::format("{} {}\n", TagOf(stream), payload.size()) + payload;
}

std::string EncodeExecExit(const ExecExit& exit) {
  nlohmann::json j = nlohmann::json::object();
  if (exit.exit_code) j["exit_code"] = *exit.exit_code;
  if (exit.signal) j["signal"] = *exit.signal;
  if (!exit.message.empty()) j["message"] = exit.message;
  return EncodeExecFrame(ExecStream::kExit, j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
}

absl::StatusOr<ExecExit> DecodeExecExit(const std::string& payload) {
  nlohmann::json j = nlohmann::json::parse(payload, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return absl::InvalidArgumentError("exec exit frame: not JSON");
  JsonReader r(j, "exit");
  RETURN_IF_ERROR(r.CheckObject({"exit_code", "signal", "message"}));
  ExecExit out;
  if (j.contains("exit_code")) {
    ASSIGN_OR_RETURN(int64_t code, r.Int("exit_code", std::nullopt, 0, 255));
    out.exit_code = static_cast<int>(code);
  }
  if (j.contains("signal")) {
    ASSIGN_OR_RETURN(int64_t sig, r.Int("signal", std::nullopt, 1, 127));
    out.signal = static_cast<int>(sig);
  }
  ASSIGN_OR_RETURN(out.message, r.String("message", std::string()));
  return out;
}

absl::StatusOr<std::vector<ExecFrame>> ExecFrameDecoder::Feed(const std::string& bytes) {
  if (failed_) return absl::InvalidArgumentError("exec stream: decoder failed earlier");
  buffer_ += bytes;
  std::vector<ExecFrame> frames;
  const auto fail = [&](const std::string& why) {
    failed_ = true;
    return absl::InvalidArgumentError("exec stream: " + why);
  };
  size_t pos = 0;
  while (pos < buffer_.size()) {
    if (done_) return fail("bytes after the exit frame");
    const size_t lf = buffer_.find('\n', pos);
    if (lf == std::string::npos) {
      if (buffer_.size() - pos > kMaxHeaderBytes) return fail("frame header over 32 bytes");
      break;
    }
    if (lf - pos > kMaxHeaderBytes) return fail("frame header over 32 bytes");
    const std::string header = buffer_.substr(pos, lf - pos);
    const size_t sp = header.find(' ');
    if (sp == std::string::npos) return fail(fmt::format("malformed frame header '{}'", header));
    const std::string tag = header.substr(0, sp);
    const std::string len_text = header.substr(sp + 1);
    ExecStream stream;
    if (tag == "stdout") {
      stream = ExecStream::kStdout;
    } else if (tag == "stderr") {
      stream = ExecStream::kStderr;
    } else if (tag == "exit") {
      stream = ExecStream::kExit;
    } else {
      return fail(fmt::format("unknown frame tag '{}'", tag));
    }
    if (len_text.empty() || len_text.size() > 7 || len_text.find_first_not_of("0123456789") != std::string::npos) {
      return fail(fmt::format("malformed frame length '{}'", len_text));
    }
    const size_t len = static_cast<size_t>(std::strtoull(len_text.c_str(), nullptr, 10));
    if (len > kMaxExecFrameBytes) return fail(fmt::format("frame of {} bytes is over the 1 MiB limit", len));
    if (buffer_.size() - (lf + 1) < len) break;  // the payload is not all here yet
    frames.push_back({.stream = stream, .payload = buffer_.substr(lf + 1, len)});
    if (stream == ExecStream::kExit) done_ = true;
    pos = lf + 1 + len;
  }
  buffer_.erase(0, pos);
  return frames;
}

}  // namespace gpugeek::api

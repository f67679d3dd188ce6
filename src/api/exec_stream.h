#pragma once
// The body of an exec reply (`POST /v1/jobs/{id}/exec` on the server, `POST /v1/exec` on an agent's node
// API listener): the command's output as it is produced, then how it ended, as a sequence of frames.
//
//   frame   = tag SP length LF payload        ; length: decimal byte count of payload, 0 .. kMaxExecFrameBytes
//   tag     = "stdout" | "stderr" | "exit"
//
// "stdout"/"stderr" frames carry raw bytes of that stream, in the order the agent read them (bytes of
// one stream are never reordered). The last frame is exactly one "exit" frame whose payload is JSON:
//   {"exit_code": 7}                       the command exited with a code
//   {"signal": 9, "message": "..."}        it was killed by a signal (a timeout or the client leaving
//                                          also says so in "message")
//   {"exit_code": 127, "message": "..."}   it could not be started (the message says why)
// A body that ends without an "exit" frame was cut off (the agent or the connection went away).
//
//   ExecFrameDecoder d;
//   for (chunk : body) { ASSIGN_OR_RETURN(auto frames, d.Feed(chunk)); for (f : frames) ... }

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace gpugeek::api {

inline constexpr size_t kMaxExecFrameBytes = size_t{1} << 20;  // 1 MiB per frame
inline constexpr char kExecStreamContentType[] = "application/vnd.gpugeek.exec-stream";

enum class ExecStream { kStdout, kStderr, kExit };

struct ExecFrame {
  ExecStream stream = ExecStream::kStdout;
  std::string payload;
};

// How an exec ended: the payload of the "exit" frame.
struct ExecExit {
  std::optional<int> exit_code;  // 0..255 when the command exited
  std::optional<int> signal;     // the signal that killed it, otherwise
  std::string message;           // "" or why (timeout, client gone, could not start)
  // What a shell would give as its status: the code, 128 + signal, or 1 when neither is known.
  int ShellStatus() const;
};

// One encoded frame. `payload` must be at most kMaxExecFrameBytes (longer ones abort: a caller bug).
std::string EncodeExecFrame(ExecStream stream, const std::string& payload);
std::string EncodeExecExit(const ExecExit& exit);
// Parses an "exit" frame's payload. InvalidArgument naming what is wrong.
absl::StatusOr<ExecExit> DecodeExecExit(const std::string& payload);

// Splits an exec body into frames, whatever the chunking. Not thread-safe.
class ExecFrameDecoder {
 public:
  // Appends `bytes` and returns every frame now complete. InvalidArgument for a malformed header (an
  // unknown tag, a length that is not decimal or over kMaxExecFrameBytes, a header over 32 bytes) or
  // bytes after the "exit" frame; after an error the decoder stays failed.
  absl::StatusOr<std::vector<ExecFrame>> Feed(const std::string& bytes);
  // Whether the "exit" frame has been decoded.
  bool done() const { return done_; }

 private:
  std::string buffer_;
  bool done_ = false;
  bool failed_ = false;
};

}  // namespace gpugeek::api

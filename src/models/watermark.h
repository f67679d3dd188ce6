#pragma once
// Keyed watermarks in a model's weights: a T-bit mark that survives quantisation, pruning and fine-tuning
// well enough to show ownership of a leaked copy. (Signing, signing.h, shows integrity; a mark can be found
// and removed by someone who knows the method, Wang and Kerschbaum, ICASSP 2019, so the two are separate
// tools.)
//
// Method: the detector of Uchida et al., "Embedding Watermarks into Deep Neural Networks" (ICMR 2017), with a
// key-derived projection, embedded post hoc in weight space instead of by a training regulariser. For one
// weight tensor w (n values, flattened) and a secret key:
//   X   a T x n matrix of +-1 entries and b a T-bit message, both drawn from the key (SHA-256 in counter
//       mode over key || label || block number; any language can recompute them);
//   bit j reads 1 when (X w)_j > 0, else 0; the bit error rate (BER) is the fraction differing from b.
// Embedding moves w the least (in L2) so that every (X w)_j has the sign of bit j with a margin of
// `strength` x ||w|| (sequential projections, Kaczmarz; the rows of X are near-orthogonal when n >> T, so a
// few sweeps converge). Relative change of w: about sqrt(T / n x E[(s - Z)+^2]) for s = strength and Z a
// standard normal (each projection of w starts as about ||w|| x Z), that is sqrt(T / n x ((s^2 + 1) Phi(s) +
// s phi(s))): 3.2% for T = 256, n = 262,144, s = 0.5. An unmarked tensor reads each bit
// at random: the chance that it matches at least T - e bits is the binomial tail P[Bin(T, 1/2) >= T - e], the
// false-match probability the detector reports.

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "models/quantize.h"

namespace gpugeek::models {

struct WatermarkParams {
  int bits = 256;         // T
  double strength = 0.5;  // margin of each projection, in units of ||w||
  int max_sweeps = 20;
};

// The message b: T bits drawn from the key.
std::vector<uint8_t> WatermarkMessage(std::string_view key, int bits);

// Projections (X w)_j for j < bits. Cost O(bits x n).
std::vector<double> WatermarkProjections(std::string_view key, std::span<const float> w, int bits);

struct WatermarkReading {
  int bits = 0;
  int errors = 0;          // bits that differ from the message
  double ber = 0;          // errors / bits
  double false_match = 0;  // P[Bin(bits, 1/2) >= bits - errors]: an unmarked tensor reading this well
  double min_margin = 0;   // min over j of sign_j (X w)_j / ||w||: > 0 when every bit reads right
};

WatermarkReading ReadWatermark(std::string_view key, std::span<const float> w, int bits);

struct EmbedResult {
  WatermarkReading after;
  int sweeps = 0;
  double relative_change = 0;  // ||w' - w|| / ||w||
};

// Embeds the mark in `w` in place. InvalidArgument when the key is empty, bits is outside 1..4096, n < 4 x
// bits (too few weights to carry the mark), w is all zeros, or a value is not finite.
absl::StatusOr<EmbedResult> EmbedWatermark(std::string_view key, std::span<float> w, const WatermarkParams& params);

// The same on a safetensors file: tensor `tensor` of `in` (F32, F16 or BF16; empty name: the largest 2-D
// such tensor) is marked and the file written to `out` with every other tensor as it was. Errors: the
// file's, an unknown or unsuitable tensor, EmbedWatermark's.
struct FileEmbedResult {
  std::string tensor;
  EmbedResult result;
};
absl::StatusOr<FileEmbedResult> EmbedWatermarkInFile(const std::string& in, const std::string& out,
                                                     std::string_view key, std::string tensor,
                                                     const WatermarkParams& params);

// Reads the mark of tensor `tensor` (empty: the largest 2-D float tensor, or quantised one) of a safetensors
// file, dequantising a tensor `gpugeek quantize` wrote.
struct FileReading {
  std::string tensor;
  WatermarkReading reading;
};
absl::StatusOr<FileReading> ReadWatermarkInFile(const std::string& path, std::string_view key, std::string tensor,
                                                int bits);

}  // namespace gpugeek::models

#pragma once
// Shingles: the sets that near-duplicate detection compares. A document is normalised (normalize_text
// below), cut into n-grams of words or of bytes, and each n-gram hashed to 64 bits (xxHash's XXH3, seed 0,
// so hashes are the same on every machine and run). Two documents' resemblance is the Jaccard index of
// their shingle sets, |A ∩ B| / |A ∪ B| (Broder, "On the resemblance and containment of documents", 1997).

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace gpugeek::data {

// What an n-gram is made of. kWord: n consecutive words of the normalised text (datatrove's and
// text-dedup's default, n = 5). kChar: n consecutive bytes of it (for short or unsegmented text).
enum class ShingleUnit { kWord, kChar };

struct ShingleOptions {
  ShingleUnit unit = ShingleUnit::kWord;
  int n = 5;  // words or bytes per shingle; 1..64 (ValidateNearDuplicateOptions)
};

// The text as compared: ASCII letters lowered, every run of bytes that are neither ASCII letters or digits
// nor part of a UTF-8 multi-byte sequence (bytes >= 0x80) turned into one space, no space at either end.
// So "Copyright (C) 2020,\n  Foo" and "copyright c 2020 foo" normalise alike. Non-ASCII letters are kept
// byte for byte (no Unicode case folding).
std::string NormalizeText(std::string_view text);

// The sorted, distinct 64-bit hashes of the n-grams of `normalized` (the output of NormalizeText). A text
// shorter than one n-gram gives a single shingle of all of it; an empty one, no shingle.
std::vector<uint64_t> Shingles(std::string_view normalized, const ShingleOptions& options);

// The Jaccard index of two sorted, distinct hash sets: |a ∩ b| / |a ∪ b|; 1 when both are empty.
double Jaccard(const std::vector<uint64_t>& a, const std::vector<uint64_t>& b);

// 64-bit XXH3 (seed 0) of `bytes`: the hash of shingles and of normalised texts for exact duplicates.
uint64_t Hash64(std::string_view bytes);

}  // namespace gpugeek::data

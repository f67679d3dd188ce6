// Arbitrary bytes through the JSON Lines and CSV record parsers (files users push): every row is a
// record or an error with a line number inside the input, never a crash.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "data/records.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  for (auto format : {gpugeek::data::RecordFormat::kJsonLines, gpugeek::data::RecordFormat::kCsv}) {
    gpugeek::data::ParsedRecords out;
    gpugeek::data::ParseRecords(bytes, "fuzz", format, {.max_record_bytes = 4096}, out);
    // Line breaks: LF, CRLF, and a lone CR (which CSV also ends a row at).
    uint64_t lines = 1;
    for (size_t i = 0; i < bytes.size(); ++i) {
      lines += bytes[i] == '\n' || (bytes[i] == '\r' && (i + 1 == bytes.size() || bytes[i + 1] != '\n'));
    }
    for (const auto& r : out.records) {
      if (r.line < 1 || r.line > lines || r.text.size() > bytes.size()) std::abort();
      (void)gpugeek::data::CanonicalRecordLine(r);
    }
    for (const auto& e : out.errors) {
      if (e.line < 1 || e.line > lines) std::abort();
    }
  }
  return 0;
}

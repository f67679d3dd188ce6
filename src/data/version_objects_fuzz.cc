// Arbitrary bytes through the tree and commit decoders (the bytes of objects a damaged or hostile store
// holds): they must return an error or a value that encodes back to the same bytes, never crash.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "data/version_objects.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  if (auto tree = gpugeek::data::DecodeTree(bytes); tree.ok()) {
    // A decoded tree re-encodes to a tree that decodes to the same entries.
    auto again = gpugeek::data::DecodeTree(gpugeek::data::EncodeTree(*tree));
    if (!again.ok() || again->entries != tree->entries) std::abort();
  }
  if (auto commit = gpugeek::data::DecodeCommit(bytes); commit.ok()) {
    auto again = gpugeek::data::DecodeCommit(gpugeek::data::EncodeCommit(*commit));
    if (!again.ok() || again->tree != commit->tree || again->parents != commit->parents ||
        again->message != commit->message) {
      std::abort();
    }
  }
  return 0;
}

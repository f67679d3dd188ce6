#pragma once
// Where each memory term's formula comes from (`gpugeek plan --explain`, the plan JSON's "source").

#include <string_view>

namespace gpugeek::workload {

// The source of the term labelled `label` (memory_breakdown.h), for training or serving plans; "" for
// a label it does not know.
std::string_view MemoryTermSource(std::string_view label, bool training);

}  // namespace gpugeek::workload

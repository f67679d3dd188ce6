#include "common/table.h"

#include <gtest/gtest.h>

namespace gpugeek {
namespace {

TEST(TextTable, AlignsColumns) {
  TextTable t({"GPU", "MEMORY"});
  t.AlignRight(1);
  t.AddRow({"H100", "80.0 GiB"});
  t.AddRow({"T4", "15.0 GiB"});
  EXPECT_EQ(t.Render(),
            "GPU     MEMORY\n"
            "H100  80.0 GiB\n"
            "T4    15.0 GiB\n");
}

TEST(TextTable, PadsShortRows) {
  TextTable t({"A", "B"});
  t.AddRow({"x"});
  EXPECT_EQ(t.Render(), "A  B\nx\n");
}

}  // namespace
}  // namespace gpugeek

// Fuzz target: stored ledger transactions (ledger/transaction.h FromText) read back from the store, where
// a damaged or hostile row must be DataLoss, never a crash, and what parses must round-trip.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "ledger/ledger.h"
#include "ledger/transaction.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<gpugeek::ledger::Transaction> txn = gpugeek::ledger::FromText(text);
  if (!txn.ok()) return 0;
  absl::StatusOr<gpugeek::ledger::Transaction> again = gpugeek::ledger::FromText(gpugeek::ledger::ToText(*txn));
  if (!again.ok() || !(*again == *txn)) std::abort();
  gpugeek::ledger::Ledger ledger;
  if (!ledger.Post(*txn).ok()) std::abort();
  return 0;
}

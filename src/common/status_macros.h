#pragma once
// Early-return helpers for absl::Status / absl::StatusOr<T>.
//
//   RETURN_IF_ERROR(DoThing());                 // returns the Status if it is not OK
//   ASSIGN_OR_RETURN(auto v, ComputeValue());   // unwraps a StatusOr or returns its Status
//
// Our code never throws; these keep error paths as short as exceptions would.

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define GPUGEEK_CONCAT_INNER_(a, b) a##b
#define GPUGEEK_CONCAT_(a, b) GPUGEEK_CONCAT_INNER_(a, b)

#define RETURN_IF_ERROR(expr)                                                                 \
  do {                                                                                        \
    if (absl::Status gpugeek_status_ = (expr); !gpugeek_status_.ok()) return gpugeek_status_; \
  } while (0)

#define ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr)   \
  auto tmp = (expr);                             \
  if (!tmp.ok()) return std::move(tmp).status(); \
  lhs = std::move(tmp).value()

#define ASSIGN_OR_RETURN(lhs, expr) ASSIGN_OR_RETURN_IMPL_(GPUGEEK_CONCAT_(gpugeek_statusor_, __LINE__), lhs, expr)

#pragma once
// absl::Status helpers for the controller, worker and CLI (not trainer_core).

#include <cerrno>
#include <cstring>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace trellis {

inline absl::Status ErrnoStatus(const std::string& what, int err = errno) {
  return absl::InternalError(what + ": " + std::strerror(err));
}

}  // namespace trellis

#define TRELLIS_CONCAT_INNER(a, b) a##b
#define TRELLIS_CONCAT(a, b) TRELLIS_CONCAT_INNER(a, b)

#define RETURN_IF_ERROR(expr)                 \
  do {                                        \
    absl::Status _st = (expr);                \
    if (!_st.ok()) return _st;                \
  } while (0)

#define ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                          \
  if (!tmp.ok()) return tmp.status();         \
  lhs = std::move(*tmp)

#define ASSIGN_OR_RETURN(lhs, expr) \
  ASSIGN_OR_RETURN_IMPL(TRELLIS_CONCAT(_status_or_, __LINE__), lhs, expr)

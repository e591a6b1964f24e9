#pragma once
// A caller waiting for an answer, as the parts see it: a token, and the
// SendReply command that answers it (effects.h; docs/architecture.md, "The
// controller's parts").

#include <cstdint>
#include <utility>
#include <variant>

#include "absl/status/statusor.h"
#include "controller/app/views.h"
#include "controller/core/run_state.h"

namespace trellis::controller {

// The shell holds the caller's callback; a part holds only this token.
template <typename T>
struct ReplyTo {
  uint64_t id = 0;
};
using ReplyValue =
    std::variant<absl::Status, SubmitResult, RunState, GateAnswer, bool, NextLaunchAnswer,
                 StandbyAnswer>;
// Answers a caller; carried out after the state it reports is stored.
struct SendReply {
  uint64_t to = 0;
  ReplyValue value;
};
template <typename T>
struct Exactly {  // keeps Answer's value from taking part in deducing T
  using type = T;
};
template <typename T>
SendReply Answer(ReplyTo<T> to, absl::StatusOr<typename Exactly<T>::type> value) {
  if (!value.ok()) return {to.id, ReplyValue(std::in_place_type<absl::Status>, value.status())};
  return {to.id, ReplyValue(std::in_place_type<T>, std::move(*value))};
}

}  // namespace trellis::controller

#pragma once
// The callers waiting for an answer (gRPC reactors' callbacks), held by the
// shell: a part is given a ReplyTo<T> token, and its SendReply command names
// it (effects.h). Loop thread only.

#include <cstdint>
#include <functional>
#include <map>
#include <utility>

#include "common/log.h"
#include "controller/app/effects.h"

namespace trellis::controller {

class WaitingReplies {
 public:
  template <typename T>
  ReplyTo<T> Hold(Reply<T> reply) {
    uint64_t id = next_++;
    waiting_[id] = [reply = std::move(reply)](ReplyValue value) {
      if (auto* error = std::get_if<absl::Status>(&value)) return reply(*error);
      reply(std::get<T>(std::move(value)));
    };
    return {id};
  }
  // Answers the caller once; a token answered before (or never held) is logged.
  void Send(SendReply answer) {
    auto it = waiting_.find(answer.to);
    if (it == waiting_.end()) {
      spdlog::error("a reply to caller {} that is not waiting: dropped", answer.to);
      return;
    }
    auto reply = std::move(it->second);
    waiting_.erase(it);
    reply(std::move(answer.value));
  }
  size_t size() const { return waiting_.size(); }

 private:
  uint64_t next_ = 1;
  std::map<uint64_t, std::function<void(ReplyValue)>> waiting_;
};

}  // namespace trellis::controller

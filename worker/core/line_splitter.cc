#include "worker/core/line_splitter.h"

namespace trellis::worker {

void LineSplitter::Emit(std::string_view line, std::vector<LineEvent>* out) {
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  if (line.empty()) return;
  if (line.size() > max_) {
    out->push_back({LineEvent::kOversized, {}});
    return;
  }
  out->push_back({LineEvent::kLine, std::string(line)});
}

std::vector<LineEvent> LineSplitter::Feed(std::string_view data) {
  std::vector<LineEvent> out;
  while (!data.empty()) {
    size_t nl = data.find('\n');
    std::string_view chunk = data.substr(0, nl);
    if (discarding_) {
      if (nl != std::string_view::npos) discarding_ = false;
    } else if (buf_.size() + chunk.size() > max_ + 1) {
      // +1 leaves room for a '\r' before the newline. Report once, then skip
      // the rest of the line as it arrives.
      out.push_back({LineEvent::kOversized, {}});
      buf_.clear();
      discarding_ = nl == std::string_view::npos;
    } else if (nl == std::string_view::npos) {
      buf_.append(chunk);
    } else if (buf_.empty()) {
      Emit(chunk, &out);
    } else {
      buf_.append(chunk);
      Emit(buf_, &out);
      buf_.clear();
    }
    if (nl == std::string_view::npos) break;
    data.remove_prefix(nl + 1);
  }
  return out;
}

std::vector<LineEvent> LineSplitter::Finish() {
  std::vector<LineEvent> out;
  if (!discarding_ && !buf_.empty()) Emit(buf_, &out);
  buf_.clear();
  discarding_ = false;
  return out;
}

}  // namespace trellis::worker

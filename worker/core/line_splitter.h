#pragma once
// Splits a byte stream into newline-terminated lines with a bound on line
// length, so a rank that writes garbage without newlines cannot make the
// worker buffer without limit. Pure.

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace trellis::worker {

struct LineEvent {
  enum Kind { kLine, kOversized } kind = kLine;
  std::string text;  // the line without its newline (empty for kOversized)
};

class LineSplitter {
 public:
  explicit LineSplitter(size_t max_line_bytes) : max_(max_line_bytes) {}

  // Complete lines in `data` (with what was buffered before). A line longer
  // than the bound yields one kOversized and is discarded up to its newline.
  // Empty lines (and a trailing '\r') are dropped.
  std::vector<LineEvent> Feed(std::string_view data);

  // At end of stream: an unterminated last line, if any.
  std::vector<LineEvent> Finish();

  size_t buffered() const { return buf_.size(); }

 private:
  void Emit(std::string_view line, std::vector<LineEvent>* out);

  size_t max_;
  std::string buf_;
  bool discarding_ = false;
};

}  // namespace trellis::worker

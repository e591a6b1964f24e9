// The step records a rank writes to its unix socket (README, "the rank
// contract"): the worker cuts the byte stream into lines (worker/core/
// line_splitter) and decodes each (common/step_record). Ranks run user code, so
// any bytes may arrive. The lines must not depend on how the stream was cut into
// reads; a decoded record must pass the decoder's own bounds and survive the
// encode/decode trip the controller's copy takes.

#include <string>
#include <vector>

#include "common/step_record.h"
#include "fuzz/check.h"
#include "worker/core/line_splitter.h"

namespace trellis::fuzz {
namespace {

using worker::LineEvent;
using worker::LineSplitter;

// Every field of the table equal (an absent one absent on both sides).
bool Same(const StepRecord& a, const StepRecord& b) {
  for (const StepField& f : kStepFields) {
    bool same = f.is_count() ? f.get_int(a) == f.get_int(b) : f.get_double(a) == f.get_double(b);
    if (!same) return false;
  }
  return true;
}

void Append(std::vector<LineEvent>* to, std::vector<LineEvent> from) {
  for (auto& e : from) to->push_back(std::move(e));
}

// Feeds `stream` in reads of `cut` bytes (0: all at once).
std::vector<LineEvent> Split(std::string_view stream, size_t cut) {
  LineSplitter splitter(kMaxStepRecordBytes);
  std::vector<LineEvent> events;
  if (cut == 0) cut = stream.size() + 1;
  for (size_t at = 0; at < stream.size(); at += cut) {
    Append(&events, splitter.Feed(stream.substr(at, cut)));
    FUZZ_CHECK(splitter.buffered() <= kMaxStepRecordBytes + 1);
  }
  Append(&events, splitter.Finish());
  FUZZ_CHECK(splitter.buffered() == 0);
  return events;
}

void CheckDecode(std::string_view line) {
  std::string error;
  std::optional<StepRecord> record = DecodeStepRecord(line, &error);
  if (!record) {
    FUZZ_CHECK(!error.empty());
    return;
  }
  FUZZ_CHECK(line.size() <= kMaxStepRecordBytes);
  std::string check_error;
  FUZZ_CHECK(CheckStepRecord(*record, &check_error));
  const std::string encoded = EncodeStepRecord(*record);
  FUZZ_CHECK(encoded.size() <= kMaxStepRecordBytes);
  FUZZ_CHECK(encoded.find('\n') == std::string::npos);
  std::optional<StepRecord> again = DecodeStepRecord(encoded, &error);
  FUZZ_CHECK(again.has_value());
  FUZZ_CHECK(Same(*record, *again));
}

}  // namespace

void FuzzStepRecord(const uint8_t* data, size_t size) {
  const std::string_view stream = AsText(data, size);
  // The controller decodes a stored record's text as it is (no line splitting).
  CheckDecode(stream);

  const std::vector<LineEvent> whole = Split(stream, 0);
  // Reads of a size the input picks (its first byte), as a socket may deliver.
  const size_t cut = size == 0 ? 1 : 1 + data[0] % 61;
  const std::vector<LineEvent> pieces = Split(stream, cut);
  FUZZ_CHECK(whole.size() == pieces.size());
  for (size_t i = 0; i < whole.size(); ++i)
    FUZZ_CHECK(whole[i].kind == pieces[i].kind && whole[i].text == pieces[i].text);

  for (const LineEvent& e : whole) {
    if (e.kind == LineEvent::kOversized) {
      FUZZ_CHECK(e.text.empty());
      continue;
    }
    FUZZ_CHECK(!e.text.empty() && e.text.size() <= kMaxStepRecordBytes);
    FUZZ_CHECK(e.text.find('\n') == std::string::npos);
    CheckDecode(e.text);
  }
}

}  // namespace trellis::fuzz

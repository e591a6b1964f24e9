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

bool Same(const std::optional<double>& a, const std::optional<double>& b) {
  return a.has_value() == b.has_value() && (!a || *a == *b);
}

bool Same(const StepRecord& a, const StepRecord& b) {
  return a.step == b.step && a.loss == b.loss && a.tokens == b.tokens &&
         a.step_seconds == b.step_seconds && Same(a.grad_norm, b.grad_norm) &&
         Same(a.fwd_seconds, b.fwd_seconds) && Same(a.bwd_seconds, b.bwd_seconds) &&
         Same(a.optim_seconds, b.optim_seconds) && Same(a.comm_seconds, b.comm_seconds) &&
         Same(a.exposed_comm_seconds, b.exposed_comm_seconds) &&
         Same(a.expert_load_max_over_mean, b.expert_load_max_over_mean) &&
         Same(a.ep_load_max_over_mean, b.ep_load_max_over_mean) &&
         a.alloc_retries == b.alloc_retries &&
         a.mem_allocated_peak_bytes == b.mem_allocated_peak_bytes &&
         a.mem_reserved_peak_bytes == b.mem_reserved_peak_bytes &&
         a.mem_allocated_peak_fwd_bytes == b.mem_allocated_peak_fwd_bytes &&
         a.mem_allocated_peak_bwd_bytes == b.mem_allocated_peak_bwd_bytes &&
         a.mem_allocated_peak_optim_bytes == b.mem_allocated_peak_optim_bytes &&
         a.host_arena_bytes == b.host_arena_bytes && a.nccl_max_ctas == b.nccl_max_ctas &&
         a.checkpoint_step == b.checkpoint_step &&
         Same(a.checkpoint_seconds, b.checkpoint_seconds);
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

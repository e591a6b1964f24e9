#pragma once
// The step record of the rank contract: one JSON object per rank per step,
// newline-delimited, written to TRELLIS_STEP_SOCKET. Torch-free, absl-free.

#include <cstdint>
#include <iterator>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>

#include "common/step_fields.h"

namespace trellis {

inline constexpr int kStepRecordVersion = 1;
// A line longer than this is refused without parsing it (bounded decoder).
inline constexpr size_t kMaxStepRecordBytes = 4096;

// Its members come from the field table (common/step_fields.h): `step`,
// `loss`, `tokens` and `step_seconds` plain, the others std::optional.
struct StepRecord {
#define TRELLIS_STEP_RECORD_MEMBER(name, kind, required, help) \
  StepFieldMember<StepFieldKind::kind, required> name{};
  TRELLIS_STEP_RECORD_FIELDS(TRELLIS_STEP_RECORD_MEMBER)
#undef TRELLIS_STEP_RECORD_MEMBER
};

namespace step_field_detail {
template <typename T>
std::optional<T> AsOptional(const T& v) {
  return v;
}
template <typename T>
std::optional<T> AsOptional(const std::optional<T>& v) {
  return v;
}
template <typename Want, typename Member>
std::optional<Want> Get(const Member& member) {
  if constexpr (std::is_same_v<decltype(AsOptional(member)), std::optional<Want>>) {
    return AsOptional(member);
  } else {
    return std::nullopt;
  }
}
template <typename Want, typename Member>
void Set(Member* member, Want v) {
  if constexpr (std::is_same_v<decltype(AsOptional(*member)), std::optional<Want>>) *member = v;
}
}  // namespace step_field_detail

// The table, in the order of TRELLIS_STEP_RECORD_FIELDS.
inline constexpr StepField kStepFields[] = {
#define TRELLIS_STEP_FIELD_ENTRY(name, kind, required, help)                                  \
  StepField{#name,                                                                            \
            StepFieldKind::kind,                                                              \
            required,                                                                         \
            help,                                                                             \
            [](const StepRecord& r) { return step_field_detail::Get<int64_t>(r.name); },      \
            [](const StepRecord& r) { return step_field_detail::Get<double>(r.name); },       \
            [](StepRecord* r, int64_t v) { step_field_detail::Set<int64_t>(&r->name, v); },   \
            [](StepRecord* r, double v) { step_field_detail::Set<double>(&r->name, v); }},
    TRELLIS_STEP_RECORD_FIELDS(TRELLIS_STEP_FIELD_ENTRY)
#undef TRELLIS_STEP_FIELD_ENTRY
};
inline constexpr size_t kStepFieldCount = std::size(kStepFields);

// The field of that name, or nullptr.
const StepField* FindStepField(std::string_view name);

// The index of the field of that name; in a constant expression (a table of
// columns) a name that is not a field fails the build.
constexpr size_t StepFieldIndex(std::string_view name) {
  for (size_t i = 0; i < kStepFieldCount; ++i)
    if (kStepFields[i].name == name) return i;
  throw std::invalid_argument("not a step record field");
}

// The decoder's bounds on a record that arrived another way (the
// controller's copy of a worker's record): counts >= 0, times and norms
// finite and >= 0, loss finite. On failure sets *error naming the field.
bool CheckStepRecord(const StepRecord& record, std::string* error);

// One line, no trailing newline.
std::string EncodeStepRecord(const StepRecord& record);

// Strict: the line must be one JSON object with "v": 1, the four required
// fields, known optional fields of the right type and range, nothing else.
// On failure returns nullopt and sets *error to a message naming the field.
std::optional<StepRecord> DecodeStepRecord(std::string_view line, std::string* error);

}  // namespace trellis

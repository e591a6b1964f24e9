// libFuzzer's entry for one target, chosen at compile time (fuzz/CMakeLists.txt).
#include <cstring>

#include "fuzz/check.h"

#ifndef TRELLIS_FUZZ_TARGET
#error "define TRELLIS_FUZZ_TARGET to a name in trellis::fuzz::kTargets"
#endif

namespace {
trellis::fuzz::Entry FindEntry() {
  for (const auto& t : trellis::fuzz::kTargets)
    if (std::strcmp(t.name, TRELLIS_FUZZ_TARGET) == 0) return t.entry;
  __builtin_trap();
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const trellis::fuzz::Entry entry = FindEntry();
  entry(data, size);
  return 0;
}

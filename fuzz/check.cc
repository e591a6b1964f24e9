#include "fuzz/check.h"

#include <cstdio>
#include <cstdlib>

namespace trellis::fuzz {
namespace {
const char* current_input = nullptr;
}  // namespace

void SetCurrentInput(const char* name) { current_input = name; }

void Fail(const char* file, int line, const char* what) {
  std::fprintf(stderr, "fuzz invariant broken at %s:%d: %s\n", file, line, what);
  if (current_input != nullptr) std::fprintf(stderr, "  input: %s\n", current_input);
  std::fflush(stderr);
  std::abort();
}

}  // namespace trellis::fuzz

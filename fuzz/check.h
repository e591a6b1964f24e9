#pragma once
// The fuzz targets' entry points and invariant checks, shared by the libFuzzer
// binaries (fuzz/build.sh, clang) and the replay test of the main build, so the
// replay runs exactly the code that was fuzzed.

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace trellis::fuzz {

using Entry = void (*)(const uint8_t* data, size_t size);

// Each entry feeds one input to a parser and checks what must hold for any
// input. A broken invariant prints it and aborts: libFuzzer keeps the input as
// a crash, and the replay test fails.
void FuzzRunSpec(const uint8_t* data, size_t size);
void FuzzSqueue(const uint8_t* data, size_t size);
void FuzzScontrol(const uint8_t* data, size_t size);
void FuzzSacct(const uint8_t* data, size_t size);
void FuzzMeminfo(const uint8_t* data, size_t size);
void FuzzStepRecord(const uint8_t* data, size_t size);
void FuzzCorpusHeader(const uint8_t* data, size_t size);

struct Target {
  const char* name;  // also the directory under fuzz/corpus/ and fuzz/crashes/
  Entry entry;
};

inline constexpr Target kTargets[] = {
    {"run_spec", FuzzRunSpec}, {"squeue", FuzzSqueue},   {"scontrol", FuzzScontrol},
    {"sacct", FuzzSacct},      {"meminfo", FuzzMeminfo}, {"step_record", FuzzStepRecord},
    {"corpus_header", FuzzCorpusHeader},
};

// Named in the failure message (the replay sets it to the file it feeds).
void SetCurrentInput(const char* name);
[[noreturn]] void Fail(const char* file, int line, const char* what);

inline std::string_view AsText(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

}  // namespace trellis::fuzz

#define FUZZ_CHECK(cond)                                             \
  do {                                                               \
    if (!(cond)) ::trellis::fuzz::Fail(__FILE__, __LINE__, #cond);   \
  } while (0)

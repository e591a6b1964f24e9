#pragma once
// The few file-system operations trainer_core needs, on POSIX calls.
// std::filesystem is avoided in everything that links LibTorch: the 2.x pip
// wheels export their own (older) copies of its symbols, which take over the
// program's and crash it. Torch-free.

#include <cstdint>
#include <string>
#include <vector>

namespace trellis::train {

std::string JoinPath(const std::string& dir, const std::string& name);
std::string DirName(const std::string& path);
bool IsDirectory(const std::string& path);
bool IsRegularFile(const std::string& path);
bool PathExists(const std::string& path);
int64_t FileSize(const std::string& path);  // -1 when absent

// Names in `dir` (not "." or ".."), sorted; empty when `dir` cannot be read.
std::vector<std::string> ListDir(const std::string& dir);
// Regular files under `dir`, recursively, sorted by path.
std::vector<std::string> ListFilesRecursive(const std::string& dir);

// The whole file at `path`, read through one descriptor whose own path
// (/proc/self/fd: every link resolved as the kernel did when it opened the
// file) must lie under one of `roots` (each resolved too; empty: no check).
// What was checked is what is read: a link swapped between an earlier check
// and this open cannot lead out of the roots. Throws RefusedInput when the
// file lies outside them, TrainError when it cannot be read; messages start
// with `what` and the path.
std::string ReadFileUnderRoots(const std::string& path, const std::vector<std::string>& roots,
                               const std::string& what);

// Throw TrainError naming the path on failure.
void MakeDirs(const std::string& path);
void RenamePath(const std::string& from, const std::string& to);
void RemoveTree(const std::string& path);  // absent is fine
// Creates a fresh directory under $TMPDIR (or /tmp) named prefix-XXXXXX.
std::string MakeTempDir(const std::string& prefix);

// This machine's name (gethostname); "unknown" where it cannot be read.
std::string HostName();

}  // namespace trellis::train

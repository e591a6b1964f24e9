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

// Throw TrainError naming the path on failure.
void MakeDirs(const std::string& path);
void RenamePath(const std::string& from, const std::string& to);
void RemoveTree(const std::string& path);  // absent is fine
// Creates a fresh directory under $TMPDIR (or /tmp) named prefix-XXXXXX.
std::string MakeTempDir(const std::string& prefix);

}  // namespace trellis::train

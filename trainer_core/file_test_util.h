#pragma once
// Test helpers: a file's bytes; corrupting a file in place.

#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>

namespace trellis::train::testing {

// The whole file (empty when it cannot be read).
inline std::string ReadFileBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Replaces the byte `from_end` bytes before the end of `path` with its
// complement: always a change, whatever the byte was (writing a fixed value
// leaves the file intact when the byte already held it).
inline void FlipByte(const std::string& path, std::streamoff from_end) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(-from_end, std::ios::end);
  const int byte = f.get();
  if (!f || byte == std::char_traits<char>::eof())
    throw std::runtime_error("FlipByte: cannot read " + path);
  f.seekp(-from_end, std::ios::end);
  f.put(static_cast<char>(~byte));
  if (!f) throw std::runtime_error("FlipByte: cannot write " + path);
}

}  // namespace trellis::train::testing

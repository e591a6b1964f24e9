#pragma once
// SHA-256 (FIPS 180-4), for storing worker secrets hashed. Kept here rather
// than taken from a crypto library so that every build machine (the GPU one
// has no OpenSSL headers) computes it the same way; checked against the
// standard's test vectors (sha256_test.cc).

#include <string>
#include <string_view>

namespace trellis {

// The digest in lowercase hex (64 characters).
std::string Sha256Hex(std::string_view data);

}  // namespace trellis

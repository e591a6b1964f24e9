#pragma once
// Where the controller serves, written to its state directory
// (docs/architecture.md, "A controller that outlives its login node"): the
// workers of running jobs and the CLI on any node that sees the directory read
// it to find a controller that moved to another host. Written atomically each
// time a controller starts serving; removed by nobody (a stale file is
// harmless: the next controller replaces it).

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace trellis {

struct ControllerAddress {
  std::string address;  // HOST:PORT workers and TCP users dial
  std::string host;     // the host the controller runs on
  int64_t pid = 0;
  std::string version;
  int64_t started_unix = 0;  // when this controller started, seconds
  // With TLS: the CA file workers and users verify the certificate with (a
  // copy readable from the compute nodes), and its SHA-256 in hex, so that a
  // reader can tell the file it reads is the one announced. Empty: plain TCP.
  std::string tls_ca;
  std::string tls_ca_sha256;
};

// The file in a state directory: <state_dir>/controller.address.
std::string ControllerAddressPath(const std::string& state_dir);

// As JSON, one object; Parse rejects what lacks a valid HOST:PORT address,
// naming the field.
std::string FormatControllerAddress(const ControllerAddress& a);
absl::StatusOr<ControllerAddress> ParseControllerAddress(const std::string& text);

absl::Status WriteControllerAddress(const std::string& path, const ControllerAddress& a);
// NOT_FOUND when there is no file; errors name the path.
absl::StatusOr<ControllerAddress> ReadControllerAddress(const std::string& path);

}  // namespace trellis

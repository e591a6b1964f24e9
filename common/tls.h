#pragma once
// TLS on the controller's TCP port (docs/architecture.md, "Access"): the
// controller serves a certificate and key, the CLI and the workers verify it
// against a CA file. Only file loading and gRPC credentials live here; who
// may do what is decided elsewhere.

#include <grpcpp/security/credentials.h>
#include <grpcpp/security/server_credentials.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace trellis::tls {

// A PEM file read whole: it must exist, be readable and hold a block that
// starts with "-----BEGIN <what>" (what: "CERTIFICATE" or "PRIVATE KEY", which
// also matches "EC PRIVATE KEY" and "RSA PRIVATE KEY"). Errors name `flag`,
// the path and what is accepted.
absl::StatusOr<std::string> ReadPem(const std::string& flag, const std::string& path,
                                    const std::string& what);

// The private key must be this user's alone (nothing for group or others).
absl::Status CheckKeyFileMode(const std::string& flag, const std::string& path);

struct ServerFiles {
  std::string cert_path;  // PEM certificate chain, leaf first
  std::string key_path;   // PEM private key, mode 0600
};
// Server credentials from the pair; clients are not asked for certificates
// (they authenticate with tokens and attempt secrets).
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> ServerCredentials(
    const ServerFiles& files);

// Channel credentials that trust only the CA certificates in `ca_path` (for a
// self-signed pair: the certificate itself). Empty `ca_path`: plain TCP.
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> ChannelCredentials(
    const std::string& flag, const std::string& ca_path);

}  // namespace trellis::tls

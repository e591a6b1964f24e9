#include "common/tls.h"

#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

namespace trellis::tls {

absl::StatusOr<std::string> ReadPem(const std::string& flag, const std::string& path,
                                    const std::string& what) {
  if (path.empty()) return absl::InvalidArgumentError(flag + ": no file given");
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(flag + " " + path + ": cannot read it");
  std::ostringstream text;
  text << in.rdbuf();
  std::string pem = text.str();
  // "-----BEGIN CERTIFICATE-----", "-----BEGIN EC PRIVATE KEY-----", ...
  const std::string begin = "-----BEGIN ";
  for (size_t at = pem.find(begin); at != std::string::npos; at = pem.find(begin, at + 1)) {
    size_t end = pem.find("-----", at + begin.size());
    if (end == std::string::npos) break;
    std::string label = pem.substr(at + begin.size(), end - at - begin.size());
    if (label.size() >= what.size() && label.compare(label.size() - what.size(), what.size(),
                                                     what) == 0)
      return pem;
  }
  return absl::InvalidArgumentError(flag + " " + path + ": no PEM " + what +
                                    " in it (expected a '-----BEGIN ..." + what +
                                    "-----' block; deploy/tls/make-self-signed.sh makes a pair)");
}

absl::Status CheckKeyFileMode(const std::string& flag, const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) return absl::NotFoundError(flag + " " + path + ": missing");
  if (st.st_uid != geteuid() || (st.st_mode & 077) != 0) {
    char mode[8];
    snprintf(mode, sizeof(mode), "%03o", st.st_mode & 0777);
    return absl::PermissionDeniedError(
        flag + " " + path + ": a private key must be this user's alone (mode " + mode +
        ", owner uid " + std::to_string(st.st_uid) + "); chmod 600 it");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> ServerCredentials(
    const ServerFiles& files) {
  auto cert = ReadPem("--tls-cert", files.cert_path, "CERTIFICATE");
  if (!cert.ok()) return cert.status();
  if (absl::Status st = CheckKeyFileMode("--tls-key", files.key_path); !st.ok()) return st;
  auto key = ReadPem("--tls-key", files.key_path, "PRIVATE KEY");
  if (!key.ok()) return key.status();
  grpc::SslServerCredentialsOptions options(GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  options.pem_key_cert_pairs.push_back({*key, *cert});
  return grpc::SslServerCredentials(options);
}

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> ChannelCredentials(
    const std::string& flag, const std::string& ca_path) {
  if (ca_path.empty()) return grpc::InsecureChannelCredentials();
  auto ca = ReadPem(flag, ca_path, "CERTIFICATE");
  if (!ca.ok()) return ca.status();
  grpc::SslCredentialsOptions options;
  options.pem_root_certs = *ca;
  return grpc::SslCredentials(options);
}

}  // namespace trellis::tls

#include "common/controller_address.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/atomic_file.h"
#include "common/host_port.h"

namespace trellis {

using Json = nlohmann::json;

std::string ControllerAddressPath(const std::string& state_dir) {
  return state_dir + "/controller.address";
}

std::string FormatControllerAddress(const ControllerAddress& a) {
  Json j = {{"address", a.address}, {"host", a.host},       {"pid", a.pid},
            {"version", a.version}, {"started_unix", a.started_unix}};
  if (!a.tls_ca.empty()) {
    j["tls_ca"] = a.tls_ca;
    j["tls_ca_sha256"] = a.tls_ca_sha256;
  }
  return j.dump(2) + "\n";
}

absl::StatusOr<ControllerAddress> ParseControllerAddress(const std::string& text) {
  Json j = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return absl::InvalidArgumentError("not a JSON object");
  ControllerAddress a;
  auto str = [&](const char* key, std::string* out) {
    if (j.contains(key) && j[key].is_string()) *out = j[key].get<std::string>();
  };
  auto num = [&](const char* key, int64_t* out) {
    if (j.contains(key) && j[key].is_number_integer()) *out = j[key].get<int64_t>();
  };
  str("address", &a.address);
  str("host", &a.host);
  str("version", &a.version);
  str("tls_ca", &a.tls_ca);
  str("tls_ca_sha256", &a.tls_ca_sha256);
  num("pid", &a.pid);
  num("started_unix", &a.started_unix);
  if (!IsHostPort(a.address))
    return absl::InvalidArgumentError("\"address\" is '" + a.address +
                                      "', not HOST:PORT with a port in [1, 65535]");
  return a;
}

absl::Status WriteControllerAddress(const std::string& path, const ControllerAddress& a) {
  return WriteFileAtomically(path, FormatControllerAddress(a), 0644);
}

absl::StatusOr<ControllerAddress> ReadControllerAddress(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    std::string why = std::strerror(errno);
    if (errno == ENOENT) return absl::NotFoundError("no controller address file " + path);
    return absl::UnavailableError("cannot read " + path + ": " + why);
  }
  std::stringstream text;
  text << in.rdbuf();
  auto a = ParseControllerAddress(text.str());
  if (!a.ok())
    return absl::InvalidArgumentError(path + ": " + std::string(a.status().message()));
  return a;
}

}  // namespace trellis

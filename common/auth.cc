#include "common/auth.h"

#include <fcntl.h>
#include <pwd.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>

namespace trellis::auth {

namespace fs = std::filesystem;

namespace {

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? "" : v;
}

std::string Home() {
  std::string home = Env("HOME");
  if (!home.empty()) return home;
  const passwd* pw = getpwuid(getuid());
  return pw != nullptr && pw->pw_dir != nullptr ? pw->pw_dir : "/";
}

std::string Errno(const std::string& what) { return what + ": " + std::strerror(errno); }

std::string ModeText(mode_t mode) {
  char buf[8];
  std::snprintf(buf, sizeof(buf), "%04o", static_cast<unsigned>(mode & 07777));
  return buf;
}

// A credential file: regular, this user's, nothing for group or others.
absl::Status CheckPrivateFile(const std::string& path, const struct stat& st) {
  if (!S_ISREG(st.st_mode)) return absl::FailedPreconditionError(path + " is not a regular file");
  if (st.st_uid != getuid())
    return absl::PermissionDeniedError(path + " belongs to uid " + std::to_string(st.st_uid) +
                                       ", not to this user");
  if ((st.st_mode & 077) != 0)
    return absl::PermissionDeniedError(path + " has mode " + ModeText(st.st_mode) +
                                       ": others may read it; make it 0600 (chmod 600 " + path +
                                       ")");
  return absl::OkStatus();
}

bool IsTokenChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-' ||
         c == '~' || c == '+' || c == '/' || c == '=';
}

}  // namespace

std::string DefaultSocketPath() {
  std::string runtime = Env("XDG_RUNTIME_DIR");
  if (!runtime.empty() && fs::is_directory(runtime)) return runtime + "/trellis/controller.sock";
  return Home() + "/.trellis/controller.sock";
}

std::string DefaultTokenPath() {
  std::string config = Env("XDG_CONFIG_HOME");
  if (config.empty()) config = Home() + "/.config";
  return config + "/trellis/token";
}

absl::Status CheckSocketPath(const std::string& path) {
  if (path.empty() || path[0] != '/')
    return absl::InvalidArgumentError("socket path '" + path + "' must be absolute");
  if (path.size() >= sizeof(sockaddr_un{}.sun_path))
    return absl::InvalidArgumentError("socket path '" + path + "' is " +
                                      std::to_string(path.size()) +
                                      " bytes; a unix socket path is at most " +
                                      std::to_string(sizeof(sockaddr_un{}.sun_path) - 1));
  return absl::OkStatus();
}

absl::Status EnsurePrivateDir(const std::string& dir) {
  std::error_code ec;
  fs::path parent = fs::path(dir).parent_path();
  if (!parent.empty()) fs::create_directories(parent, ec);
  if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST)
    return absl::PermissionDeniedError(Errno("cannot create " + dir));
  struct stat st {};
  if (lstat(dir.c_str(), &st) != 0) return absl::PermissionDeniedError(Errno(dir));
  if (!S_ISDIR(st.st_mode)) return absl::FailedPreconditionError(dir + " is not a directory");
  if (st.st_uid != getuid())
    return absl::PermissionDeniedError(dir + " belongs to uid " + std::to_string(st.st_uid) +
                                       ", not to this user (uid " + std::to_string(getuid()) +
                                       ")");
  if ((st.st_mode & 077) != 0)
    return absl::PermissionDeniedError(dir + " has mode " + ModeText(st.st_mode) +
                                       ": group or others may enter it; make it 0700 "
                                       "(chmod 700 " + dir + ")");
  return absl::OkStatus();
}

absl::StatusOr<std::string> LoadToken(const std::string& path, bool create) {
  struct stat st {};
  if (lstat(path.c_str(), &st) != 0) {
    if (errno != ENOENT || !create) return absl::NotFoundError(Errno("token file " + path));
    if (absl::Status dir = EnsurePrivateDir(fs::path(path).parent_path().string()); !dir.ok())
      return dir;
    unsigned char bytes[32];
    std::ifstream random("/dev/urandom", std::ios::binary);
    if (!random.read(reinterpret_cast<char*>(bytes), sizeof(bytes)))
      return absl::InternalError("cannot read /dev/urandom for a token");
    std::string token;
    static constexpr char kHex[] = "0123456789abcdef";
    for (unsigned char b : bytes) token += {kHex[b >> 4], kHex[b & 15]};
    // O_EXCL: of two controllers starting at once, one writes, both read it.
    int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0600);
    if (fd >= 0) {
      std::string line = token + "\n";
      bool ok = write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size());
      close(fd);
      if (!ok) return absl::InternalError(Errno("cannot write " + path));
    } else if (errno != EEXIST) {
      return absl::PermissionDeniedError(Errno("cannot create " + path));
    }
    return LoadToken(path, false);
  }
  if (absl::Status st_ok = CheckPrivateFile(path, st); !st_ok.ok()) return st_ok;
  std::ifstream in(path);
  std::string token;
  std::getline(in, token);
  while (!token.empty() && (token.back() == '\r' || token.back() == ' ')) token.pop_back();
  if (token.size() < 32 || token.size() > 512)
    return absl::FailedPreconditionError("token file " + path +
                                         ": expected one line of 32 to 512 characters");
  return token;
}

absl::StatusOr<std::vector<TeamMember>> ParseTokensFile(std::string_view text) {
  std::vector<TeamMember> out;
  std::map<std::string, int> seen;  // token -> line
  std::istringstream in{std::string(text)};
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (size_t hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    std::istringstream words(line);
    std::vector<std::string> w;
    for (std::string word; words >> word;) w.push_back(word);
    if (w.empty()) continue;
    std::string at = "tokens file line " + std::to_string(n) + ": ";
    if (w.size() != 3)
      return absl::InvalidArgumentError(at + "expected '<token> <name> <role>', got " +
                                        std::to_string(w.size()) + " fields");
    const std::string& token = w[0];
    if (token.size() < 32 || token.size() > 512 ||
        !std::all_of(token.begin(), token.end(), IsTokenChar))
      return absl::InvalidArgumentError(
          at + "a token is 32 to 512 characters of [A-Za-z0-9._~+/=-] (e.g. openssl rand -hex 32)");
    const std::string& name = w[1];
    bool name_ok = !name.empty() && name.size() <= 32 && std::islower(name[0]) &&
                   std::all_of(name.begin(), name.end(), [](char c) {
                     return std::islower(static_cast<unsigned char>(c)) ||
                            std::isdigit(static_cast<unsigned char>(c)) || c == '.' ||
                            c == '_' || c == '-';
                   });
    if (!name_ok)
      return absl::InvalidArgumentError(at + "name '" + name +
                                        "': 1 to 32 characters of [a-z0-9._-], from a letter");
    if (w[2] != "user" && w[2] != "admin")
      return absl::InvalidArgumentError(at + "role '" + w[2] + "': expected user or admin");
    if (auto dup = seen.find(token); dup != seen.end())
      return absl::InvalidArgumentError(at + "the same token as line " +
                                        std::to_string(dup->second));
    seen[token] = n;
    out.push_back({token, name, w[2] == "admin"});
  }
  return out;
}

absl::StatusOr<std::vector<TeamMember>> LoadTokensFile(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) return absl::NotFoundError(Errno("tokens file " + path));
  if (absl::Status ok = CheckPrivateFile(path, st); !ok.ok()) return ok;
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return ParseTokensFile(text.str());
}

bool TokensEqual(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

std::string RandomSecretHex() {
  std::random_device rd;  // /dev/urandom
  static const char* kHex = "0123456789abcdef";
  std::string s;
  for (int i = 0; i < 32; ++i) {
    unsigned v = rd();
    s += kHex[v & 15];
    s += kHex[(v >> 4) & 15];
  }
  return s;
}

bool IsLoopbackListen(std::string_view host_port) {
  size_t colon = host_port.rfind(':');
  std::string_view host = colon == std::string_view::npos ? host_port : host_port.substr(0, colon);
  if (host == "localhost" || host == "[::1]" || host == "::1") return true;
  return host.substr(0, 4) == "127.";
}

std::string OwnerName() {
  const passwd* pw = getpwuid(getuid());
  if (pw != nullptr && pw->pw_name != nullptr) return pw->pw_name;
  return "uid " + std::to_string(getuid());
}

}  // namespace trellis::auth

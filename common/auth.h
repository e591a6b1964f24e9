#pragma once
// Who may talk to a controller (docs/architecture.md, "Access"): its owner
// through a unix socket in a directory only the owner can enter, and over
// TCP whoever presents a token; the owner's token lives in a file only the
// owner can read. Shared by the controller (which creates both) and the CLI
// (which finds them by the same defaults).

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace trellis::auth {

// $XDG_RUNTIME_DIR/trellis/controller.sock, else $HOME/.trellis/controller.sock.
std::string DefaultSocketPath();
// $XDG_CONFIG_HOME/trellis/token, else $HOME/.config/trellis/token.
std::string DefaultTokenPath();

// A unix socket path fits in sockaddr_un (at most 107 bytes) and is absolute.
absl::Status CheckSocketPath(const std::string& path);

// Creates `dir` (and its parents) mode 0700 when missing. An existing one
// must belong to this user and be closed to group and others: a socket or a
// token under it is then reachable by its owner only.
absl::Status EnsurePrivateDir(const std::string& dir);

// The token in `path`: a regular file of this user, mode 0600 (nothing for
// group or others), one line of at least 32 characters. Created with 32
// random bytes in hex when missing (and `create`), its directory made
// private first.
absl::StatusOr<std::string> LoadToken(const std::string& path, bool create);

// A team sharing one controller: the tokens file maps each token to a name
// and a role. Users see and act on their own runs; admins on every run and
// on nodes.
struct TeamMember {
  std::string token;
  std::string name;
  bool admin = false;
};
// One member a line: `<token> <name> <role>`, role `user` or `admin`; `#`
// starts a comment. Errors name the line and what is accepted.
absl::StatusOr<std::vector<TeamMember>> ParseTokensFile(std::string_view text);
// The file must be this user's and closed to group and others, like a token.
absl::StatusOr<std::vector<TeamMember>> LoadTokensFile(const std::string& path);

// Compares in constant time: a token is a credential.
bool TokensEqual(std::string_view a, std::string_view b);

// 32 random bytes in hex (/dev/urandom): a secret the controller hands a
// Slurm job's workers in a file of the run's directory.
std::string RandomSecretHex();

// Whether HOST:PORT binds loopback only (127.0.0.0/8, ::1, localhost).
bool IsLoopbackListen(std::string_view host_port);

// The login name of this process's user ("uid N" when it has none).
std::string OwnerName();

}  // namespace trellis::auth

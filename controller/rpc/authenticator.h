#pragma once
// Who is calling the user API (docs/architecture.md, "Access"). A call that
// came through the unix socket is the owner's: the socket's directory admits
// no one else (auth::EnsurePrivateDir). A call over TCP must carry
// `authorization: Bearer <token>` with the owner's token (the owner, an
// admin) or a team member's (--tokens-file: its name and role). The agent
// API is not checked here: workers authenticate with their attempt's secret.

#include <grpcpp/grpcpp.h>

#include <string>

#include "absl/status/statusor.h"
#include "common/auth.h"

namespace trellis::controller {

struct Caller {
  std::string name;
  bool admin = false;  // may act on every run and on nodes
};

class Authenticator {
 public:
  // `owner_token` empty: TCP callers are always refused. `token_path` is
  // named in the refusals.
  Authenticator(std::string owner, std::string owner_token, std::string token_path,
                std::vector<auth::TeamMember> team = {})
      : owner_(std::move(owner)),
        owner_token_(std::move(owner_token)),
        token_path_(std::move(token_path)),
        team_(std::move(team)) {}

  // UNAUTHENTICATED, saying what is missing and where the token is kept.
  absl::StatusOr<Caller> Authenticate(const grpc::CallbackServerContext& ctx) const;
  // The same decision from the call's peer ("unix:...", "ipv4:...") and its
  // authorization metadata (empty when absent).
  absl::StatusOr<Caller> Authenticate(std::string_view peer,
                                      std::string_view authorization) const;

 private:
  std::string owner_;
  std::string owner_token_;
  std::string token_path_;
  std::vector<auth::TeamMember> team_;  // --tokens-file: more callers over TCP
};

}  // namespace trellis::controller

#include "controller/rpc/authenticator.h"

#include "common/auth.h"

namespace trellis::controller {

absl::StatusOr<Caller> Authenticator::Authenticate(const grpc::CallbackServerContext& ctx) const {
  auto it = ctx.client_metadata().find("authorization");
  std::string_view auth;
  if (it != ctx.client_metadata().end())
    auth = std::string_view(it->second.data(), it->second.size());
  return Authenticate(ctx.peer(), auth);
}

absl::StatusOr<Caller> Authenticator::Authenticate(std::string_view peer,
                                                   std::string_view authorization) const {
  if (peer.substr(0, 5) == "unix:") return Caller{owner_, true};
  constexpr std::string_view kBearer = "Bearer ";
  if (authorization.empty())
    return absl::UnauthenticatedError(
        "this controller's user API takes calls over TCP only with a token (metadata "
        "'authorization: Bearer <token>'); its owner's token is in " +
        token_path_ + " of user " + owner_ +
        " (the CLI reads it, or TRELLIS_TOKEN); on the controller's host use its unix socket");
  if (authorization.substr(0, kBearer.size()) != kBearer)
    return absl::UnauthenticatedError("authorization: expected 'Bearer <token>'");
  std::string_view token = authorization.substr(kBearer.size());
  if (!owner_token_.empty() && auth::TokensEqual(token, owner_token_))
    return Caller{owner_, true};
  for (const auth::TeamMember& m : team_)
    if (auth::TokensEqual(token, m.token)) return Caller{m.name, m.admin};
  return absl::UnauthenticatedError("authorization: the token is not one this controller knows");
}

}  // namespace trellis::controller

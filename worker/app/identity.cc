#include "worker/app/identity.h"

#include <fstream>
#include <sstream>

namespace trellis::worker {

absl::StatusOr<v1::WorkerIdentity> LoadIdentity(const IdentityArgs& args) {
  std::ifstream in(args.secret_file);
  if (!in) return absl::FailedPreconditionError("cannot read the secret file " + args.secret_file);
  std::ostringstream content;
  content << in.rdbuf();
  std::string secret = TrimSecret(content.str());
  if (secret.empty())
    return absl::FailedPreconditionError("the secret file " + args.secret_file + " is empty");
  v1::WorkerIdentity id;
  id.set_run_id(args.run_id);
  id.set_attempt(args.attempt);
  id.set_launch(args.launch);
  id.set_node(args.node);
  id.set_secret(secret);
  return id;
}

}  // namespace trellis::worker

#pragma once
// What trellis-controller checks and settles before it serves: the TCP port's
// security (TLS, or plain TCP where that is safe), the users' tokens, the
// paths it is given, the batch-script template and how Slurm answers. Each
// error's message names the flag, for the log; the program then exits with
// kExitUsage.

#include <grpcpp/security/server_credentials.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/auth.h"
#include "common/controller_address.h"
#include "common/filesystem_kind.h"
#include "common/sqlite.h"
#include "controller/shell/flags.h"
#include "controller/slurm/slurm_cli_client.h"

namespace trellis::controller {

struct TcpSecurity {
  bool tls = false;
  std::shared_ptr<grpc::ServerCredentials> credentials;
  std::string worker_ca_pem;  // with TLS: what the workers verify the certificate with
};

// TLS from --tls-cert and --tls-key (and --tls-ca), or plain TCP: only on
// loopback unless --insecure-tcp, since specs, logs, tokens and worker
// secrets would cross the network in clear.
absl::StatusOr<TcpSecurity> CheckTcpSecurity(const ControllerFlags& flags);

struct UserAccess {
  std::string owner_token;  // --token-file's, created when missing
  std::vector<auth::TeamMember> team;
};
absl::StatusOr<UserAccess> LoadUserAccess(const ControllerFlags& flags);

// --state-dir and --db: either gives the other (the state directory is
// --db's directory; --db is <state-dir>/trellis.db), both made absolute, and
// --output-root defaults to <state-dir>/runs when --state-dir is given. The
// state directory is created when missing and must be writable.
absl::Status SettleStateDir(ControllerFlags& flags);

// Settles flags.config's paths: --output-root made absolute, created and
// checked writable (with TLS, the workers' CA copied under it, where the
// compute nodes read it); --data-root and --worker-bin (default: beside this
// binary) absolute; --prometheus-sd-file's directory writable.
absl::Status SettlePaths(ControllerFlags& flags, const TcpSecurity& security);

// How to run the Slurm commands: --slurm-bin-dir, --slurm-timeout-s, and
// whether accounting (sacct) answers, tried once here and logged.
SlurmCliOptions SlurmOptions(const ControllerFlags& flags);

// What the state directory's address file says of this controller: where
// it serves, on which host, and with TLS the workers' CA file and its digest.
ControllerAddress AddressAnnounced(const std::string& advertise, const std::string& host,
                                   const std::string& worker_tls_ca);

// The built-in batch-script template, or --sbatch-template's file.
absl::StatusOr<std::string> SbatchTemplate(const ControllerFlags& flags);

// The store's journal (--db-journal): WAL on a local filesystem, the rollback
// journal on a network one (common/filesystem_kind.h), or as the flag says;
// and the sentence saying which and why, for the log at start.
struct StoreJournal {
  sqlite::Journal journal = sqlite::Journal::kWal;
  std::string said;
};
StoreJournal ChooseStoreJournal(const std::string& flag, const std::string& db_path,
                                const absl::StatusOr<FilesystemKind>& fs);

}  // namespace trellis::controller

#pragma once
// What filesystem a path lies on, as statfs(2) tells it: local to this host,
// or shared over a network (NFS, Lustre, GPFS, ...). SQLite's WAL keeps its
// index in shared memory beside the database, which hosts sharing a network
// filesystem do not share, so a database there takes the rollback journal
// (controller/store: --db-journal).

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace trellis {

struct FilesystemKind {
  std::string name;      // "ext4", "nfs", "lustre"; "0x..." for a type not in the table
  bool network = false;  // shared with other hosts over a network
};

// The filesystem of statfs's f_type (Linux magic numbers, linux/magic.h and
// the filesystems' own): unknown types are taken as local.
FilesystemKind ClassifyFilesystem(uint64_t f_type);

// The filesystem `path` (or, when it does not exist yet, its directory) lies
// on. NOT_FOUND when neither exists; the errno's text otherwise.
absl::StatusOr<FilesystemKind> FilesystemOf(const std::string& path);

}  // namespace trellis

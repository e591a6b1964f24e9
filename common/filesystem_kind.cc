#include "common/filesystem_kind.h"

#include <sys/vfs.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace trellis {

FilesystemKind ClassifyFilesystem(uint64_t f_type) {
  struct Known {
    uint64_t magic;
    const char* name;
    bool network;
  };
  static const Known kKnown[] = {
      {0xEF53, "ext4", false},          {0x58465342, "xfs", false},
      {0x9123683E, "btrfs", false},     {0x01021994, "tmpfs", false},
      {0x794C7630, "overlayfs", false}, {0x2FC12FC1, "zfs", false},
      {0x6969, "nfs", true},            {0x0BD00BD0, "lustre", true},
      {0x47504653, "gpfs", true},       {0xFF534D42, "cifs", true},
      {0xFE534D42, "smb2", true},       {0x19830326, "beegfs", true},
      {0x00C36400, "ceph", true},       {0x01021997, "9p", true},
      {0x6B414653, "afs", true},        {0x5346414F, "afs", true},
      {0x73757245, "coda", true},       {0xA501FCF5, "panfs", true},
      {0x65735546, "fuse", true},  // sshfs, s3fs, ...: not one host's disk
  };
  for (const Known& k : kKnown)
    if (k.magic == f_type) return {k.name, k.network};
  char hex[24];
  std::snprintf(hex, sizeof hex, "0x%llx", static_cast<unsigned long long>(f_type));
  return {hex, false};
}

absl::StatusOr<FilesystemKind> FilesystemOf(const std::string& path) {
  struct statfs st;
  if (::statfs(path.c_str(), &st) == 0)
    return ClassifyFilesystem(static_cast<uint64_t>(st.f_type));
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "."
                          : slash == 0               ? "/"
                                                     : path.substr(0, slash);
  if (::statfs(dir.c_str(), &st) == 0)
    return ClassifyFilesystem(static_cast<uint64_t>(st.f_type));
  if (errno == ENOENT) return absl::NotFoundError(path + ": neither it nor its directory exists");
  return absl::InternalError("statfs " + dir + ": " + std::strerror(errno));
}

}  // namespace trellis

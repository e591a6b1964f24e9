#include "controller/app/spec_paths.h"

#include <fcntl.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <iterator>

#include "absl/strings/str_join.h"
#include "common/corpus_header.h"

namespace trellis::controller {

namespace fs = std::filesystem;

namespace {

// ".." and "." removed and every symlink of the part that exists followed.
fs::path Resolved(const std::string& path) {
  std::error_code ec;
  fs::path out = fs::weakly_canonical(path, ec);
  // Unreadable on the way: compared as written, which cannot widen a root.
  return ec ? fs::path(path).lexically_normal() : out;
}

// `given` resolved, or the refusal naming the field and the roots.
absl::Status UnderOneOf(const std::string& field, const std::string& given,
                        const std::vector<std::string>& roots, const std::string& which) {
  fs::path resolved = Resolved(given);
  bool written_under = false;  // a link leads out: say where
  for (const auto& root : roots) {
    if (IsUnderRoot(resolved, Resolved(root))) return absl::OkStatus();
    written_under = written_under || IsUnderRoot(given, root);
  }
  // Where a path outside every root leads is not said.
  std::string shown = given;
  if (written_under) shown += " (resolves to " + resolved.string() + ")";
  return absl::InvalidArgumentError(field + ": " + shown + " is not under " + which + " (" +
                                    absl::StrJoin(roots, ", ") + ")");
}

// The ranks start in the run directory on other hosts, so the corpus must
// be named by an absolute path on the shared file system, and it must be
// readable here (the login node sees the same file system). The roots are
// checked first: nothing is said about a file outside them.
absl::Status CheckTrainingData(const std::string& path, const std::vector<std::string>& roots) {
  if (path.empty())
    return absl::InvalidArgumentError(
        "training.data: a [model] run needs a corpus (a file written by trellis-corpus)");
  if (path.front() != '/')
    return absl::InvalidArgumentError("training.data: must be an absolute path (ranks start in "
                                      "the run directory), got \"" + path + "\"");
  if (absl::Status out = UnderOneOf("training.data", path, roots,
                                    "a data root of this controller (--data-root)");
      !out.ok())
    return out;
  struct stat st;
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode) || ::access(path.c_str(), R_OK) != 0)
    return absl::InvalidArgumentError("training.data: " + path +
                                      " is not a readable file on the controller's host");
  return absl::OkStatus();
}

// The corpus's header, read here so that a file that is no corpus, or one
// the model cannot take, is refused now rather than when the ranks start,
// after the run has waited in the queue. The ranks check the whole file.
absl::Status CheckCorpusHeader(const std::string& path, const spec::TrainerSpec& trainer) {
  const std::string field = "training.data: " + path;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return absl::InvalidArgumentError(field + " is not a readable file on the "
                                                "controller's host");
  char head[kCorpusHeaderBytesV2] = {};
  struct stat st;
  const bool stated = ::fstat(fd, &st) == 0;
  const ssize_t got = stated ? ::pread(fd, head, sizeof head, 0) : -1;
  ::close(fd);
  const uint64_t size = stated ? static_cast<uint64_t>(st.st_size) : 0;
  if (got < 0 || static_cast<uint64_t>(got) < std::min<uint64_t>(size, sizeof head))
    return absl::InvalidArgumentError(field + " cannot be read on the controller's host");
  CorpusHeader header;
  if (std::string why = ParseCorpusHeader(head, size, &header); !why.empty())
    return absl::InvalidArgumentError(field + " is not a corpus Trellis can read: " + why +
                                      " (write one with trellis-corpus build or synthetic)");
  if (static_cast<int64_t>(header.vocab) > trainer.model.vocab)
    return absl::InvalidArgumentError(field + " has vocab " + std::to_string(header.vocab) +
                                      ", larger than model.vocab = " +
                                      std::to_string(trainer.model.vocab));
  if (static_cast<int64_t>(header.tokens) < trainer.training.seq_len + 1)
    return absl::InvalidArgumentError(
        field + " has " + std::to_string(header.tokens) +
        " tokens, fewer than one row of training.seq_len + 1 = " +
        std::to_string(trainer.training.seq_len + 1));
  return absl::OkStatus();
}

}  // namespace

bool IsUnderRoot(const fs::path& path, const fs::path& root) {
  fs::path p = path.lexically_normal();
  fs::path r = root.lexically_normal();
  auto r_end = r.end();
  // "/data/" has an empty last component.
  if (r_end != r.begin() && std::prev(r_end)->empty()) --r_end;
  auto p_it = p.begin();
  for (auto r_it = r.begin(); r_it != r_end; ++r_it, ++p_it)
    if (p_it == p.end() || *p_it != *r_it) return false;
  return true;
}

std::vector<std::string> DefaultDataRoots(const std::string& output_root) {
  std::vector<std::string> roots;
  std::string home;
  long size = ::sysconf(_SC_GETPW_R_SIZE_MAX);
  std::vector<char> buf(size > 0 ? static_cast<size_t>(size) : 16384);
  struct passwd pw, *found = nullptr;
  if (::getpwuid_r(::geteuid(), &pw, buf.data(), buf.size(), &found) == 0 && found &&
      found->pw_dir && found->pw_dir[0] == '/')
    home = found->pw_dir;
  else if (const char* env = std::getenv("HOME"); env && env[0] == '/')
    home = env;
  // "/" as a home (system users) would admit every path.
  if (!home.empty() && fs::path(home).lexically_normal() != "/") roots.push_back(home);
  if (!output_root.empty()) roots.push_back(output_root);
  return roots;
}

absl::Status CheckDataRoots(const std::vector<std::string>& roots) {
  for (const auto& r : roots) {
    if (r.empty() || r.front() != '/')
      return absl::InvalidArgumentError("--data-root " + r + ": must be an absolute path");
    // The ranks get the roots one per line (TRELLIS_DATA_ROOTS).
    if (r.find('\n') != std::string::npos)
      return absl::InvalidArgumentError("--data-root " + r + ": must not contain a newline");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ResolveTrainingData(const std::string& path,
                                                const std::vector<std::string>& data_roots) {
  if (path.empty() || path.front() == '/') return path;
  if (!spec::IsSafeRelativePath(path))
    return absl::InvalidArgumentError(
        "training.data: a relative corpus path is looked up under the data roots and must be "
        "[A-Za-z0-9._-] components without '..', got \"" + path + "\"");
  std::vector<std::string> looked;
  for (const std::string& root : data_roots) {
    const std::string candidate = (fs::path(root) / path).string();
    struct stat st;
    if (::stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode)) return candidate;
    looked.push_back(candidate);
  }
  return absl::InvalidArgumentError(
      "training.data: \"" + path + "\" is in no data root of this controller (looked for " +
      absl::StrJoin(looked, ", ") + "); build it in one (trellis-corpus build " +
      (looked.empty() ? path : looked.front()) + " TEXT_DIR...) or give an absolute path");
}

absl::Status CheckSpecPaths(const spec::RunSpec& spec, const std::vector<std::string>& data_roots,
                            const std::string& output_root) {
  if (spec.has_model) {
    if (absl::Status st = CheckTrainingData(spec.trainer.training.data, data_roots); !st.ok())
      return st;
    if (absl::Status st = CheckCorpusHeader(spec.trainer.training.data, spec.trainer); !st.ok())
      return st;
  }
  // Relative without ".." (the spec parser), but a link inside the root may
  // lead elsewhere.
  if (!spec.job.output_dir.empty() && !output_root.empty())
    return UnderOneOf("job.output_dir", output_root + "/" + spec.job.output_dir, {output_root},
                      "the output root");
  return absl::OkStatus();
}

}  // namespace trellis::controller

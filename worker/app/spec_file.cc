#include "worker/app/spec_file.h"

#include <fstream>

namespace trellis::worker {

absl::StatusOr<spec::RunSpec> LoadSpec(const std::string& run_dir) {
  const std::string path = run_dir + "/spec.toml";
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::FailedPreconditionError("cannot read the run spec " + path);
  std::string text(spec::kMaxSpecBytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  if (text.size() > spec::kMaxSpecBytes)
    return absl::FailedPreconditionError(path + " is larger than " +
                                         std::to_string(spec::kMaxSpecBytes) + " bytes");
  spec::FieldErrors errors;
  auto parsed = spec::ParseRunSpec(text, &errors);
  if (!parsed) return absl::FailedPreconditionError(path + ": " + spec::JoinErrors(errors));
  return *parsed;
}

}  // namespace trellis::worker

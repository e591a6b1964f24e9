#pragma once
// `key=value` assignments given on a command line (`trellis submit FILE
// slurm.nodes=1 training.lr=1e-3`), applied to a spec's TOML before it is
// parsed, as sbatch flags win over #SBATCH lines. Pure.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/spec/field_errors.h"

namespace trellis::spec {

// The spec's text with each assignment set, in order (a later one wins), as
// TOML again (comments are not kept). A key is dotted ("restart.max_restarts",
// "env.NCCL_DEBUG"); a value is read as a TOML value (2, 1e-3, true,
// ["a", "b"], "quoted") and otherwise taken as a string, as it is where the
// spec wants a string (`job.name=007`). Errors name the assignment and what
// is accepted; the spec's own checks (unknown keys with a suggestion, ranges)
// are ParseRunSpec's, on the text returned.
std::optional<std::string> ApplyOverrides(std::string_view toml_text,
                                          const std::vector<std::string>& assignments,
                                          FieldErrors* errors);

// The same, keeping the text's opening comment lines (where the spec came
// from) and adding `comment` (whole "# ..." lines) after them, before the TOML.
std::optional<std::string> ApplyOverridesKeepingOpening(std::string_view toml_text,
                                                        const std::vector<std::string>& assignments,
                                                        const std::string& comment,
                                                        FieldErrors* errors);

// The accepted word nearest `word` by edit distance, if near enough to be a
// likely misspelling ("nodez" -> "nodes"); "" otherwise.
std::string NearestWord(std::string_view word, const std::vector<std::string>& accepted);

}  // namespace trellis::spec

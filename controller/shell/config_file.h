#pragma once
// trellis-controller --config FILE: every flag also a key of a TOML file,
// named as the flag without its dashes (`listen = "0.0.0.0:50151"`,
// `data-root = ["/scratch", "/home"]`, `insecure-tcp = true`; `_` for `-`
// too). The file's keys become flags in front of the command line's, for the
// flags the command line does not give: flags win. docs/controller-config.md
// is the reference of every key (ConfigReference writes it).

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace trellis::controller {

// `args` (without the program's name) with --config FILE's keys, as flags,
// in front of them. INVALID_ARGUMENT naming the file and what is wrong: not
// readable, not TOML (line and column), a key that is no flag (with the
// nearest), a value of the wrong type (with the type the key takes), a
// table. `args` unchanged when they give no --config.
absl::StatusOr<std::vector<std::string>> ArgsWithConfigFile(const CLI::App& app,
                                                            const std::vector<std::string>& args);

// The keys `app` takes in a config file, as a Markdown table: key, type,
// default (the rule, for those that depend on the environment), what it
// sets (the flag's help).
std::string ConfigReference(const CLI::App& app);

}  // namespace trellis::controller

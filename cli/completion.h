#pragma once
// Shell completion for `trellis`, written from the CLI's own definition (its
// verbs, their flags and what their operands name), so that it never falls
// behind: `trellis completion bash`, `trellis completion zsh`.

#include <CLI/CLI.hpp>

#include <string>

namespace trellis::cli {

// A bash script defining `_trellis` and `complete -F _trellis trellis`: verbs
// and global flags in first place, each verb's flags after a '-', run ids for
// a verb's ID/RUN operand (from `trellis ls --json`), node names for NODE
// (from `sinfo`, else `trellis nodes --json`), files for FILE.
std::string BashCompletion(const CLI::App& app);
// The same for zsh, through its bash completion layer (bashcompinit).
std::string ZshCompletion(const CLI::App& app);

}  // namespace trellis::cli

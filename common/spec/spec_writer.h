#pragma once
// A run spec written back as TOML with every key, its defaults filled in: what
// `trellis submit --dry-run` shows as the spec that will run. Parsing the text
// gives the same spec again (spec_writer_test). Pure.

#include <string>

#include "common/spec/run_spec.h"

namespace trellis::spec {

// Sections in the parser's order; the trainer's ([model], [parallel],
// [training], [checkpoint]) only for a [model] run.
std::string ResolvedSpecToml(const RunSpec& spec);

}  // namespace trellis::spec

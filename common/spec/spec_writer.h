#pragma once
// A run spec written back as TOML with every key, its defaults filled in: what
// `trellis submit --dry-run` shows as the spec that will run. Parsing the text
// gives the same spec again (spec_writer_test). Pure.

#include <string>
#include <utility>
#include <vector>

#include "common/spec/run_spec.h"

namespace trellis::spec {

// Sections in the parser's order; the trainer's ([model], [parallel],
// [training], [checkpoint]) only for a [model] run.
std::string ResolvedSpecToml(const RunSpec& spec);

// The same as ("section.key", value) pairs in that order, the value as TOML
// writes it; a key left to its default ("# key = ...") with that text.
std::vector<std::pair<std::string, std::string>> ResolvedKeyValues(const RunSpec& spec);

// A run's lineage for `show`, `ls` and the report, from its training.init_from
// as stored ("DIR@STEP"): "tiny-moe-1 at step 40 (weights)" where DIR is a
// run's checkpoints (<output root>/<run>/checkpoints), else "DIR at step 40
// (weights)"; "" without init_from.
std::string DescribeInitFrom(const TrainingSpec& training);
// The same, short, for a table cell and a JSON field: "tiny-moe-1@40", or
// "DIR@40"; "" without init_from.
std::string InitFromSource(const TrainingSpec& training);

}  // namespace trellis::spec

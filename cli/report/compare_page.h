#pragma once
// `trellis report A B ...`: runs side by side on one self-contained page, as
// the single run's report is (report_page.h): their loss, tokens/s and step
// time over steps on shared charts, a table of each, and the keys of their
// specs that differ. Pure: what the controller said in, the page out.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "trellis/v1/controller.pb.h"

namespace trellis::cli::report {

struct ComparedRun {
  v1::Run run;                                // GetRun
  std::optional<v1::RunStepsResponse> steps;  // RunSteps; nullopt: not served
};

std::string RenderComparison(const std::vector<ComparedRun>& runs, int64_t generated_ms,
                             bool utc);

// The keys whose resolved values differ between the specs (ResolvedSpecToml:
// defaults count), each with every run's value in order, "section.key".
struct SpecDifference {
  std::string key;
  std::vector<std::string> values;
};
std::vector<SpecDifference> SpecDifferences(const std::vector<std::string>& spec_tomls);

}  // namespace trellis::cli::report

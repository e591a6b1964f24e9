// The run's spec on its report: as submitted (command-line overrides
// applied), and with every default, as the run used it.
#include "cli/report/html_text.h"
#include "cli/report/report_page.h"
#include "common/spec/run_spec.h"
#include "common/spec/spec_writer.h"

namespace trellis::cli::report {

std::string SpecSection(const ReportInput& in) {
  const std::string& text = in.run.spec_toml();
  if (text.empty())
    return Section("spec", "Spec", "<p class=\"empty\">the controller sent no spec</p>\n", "");
  std::string body = "<pre class=\"spec\">" + Escape(text) + "</pre>\n";
  spec::FieldErrors errors;
  if (auto parsed = spec::ParseRunSpec(text, &errors))
    body += "<details><summary>with every default</summary>\n<pre class=\"spec\">" +
            Escape(spec::ResolvedSpecToml(*parsed)) + "</pre>\n</details>\n";
  return Section("spec", "Spec", body,
                 "As submitted, with any command-line overrides applied; \"with every default\" "
                 "shows the keys it left out too.");
}

}  // namespace trellis::cli::report

#include "cli/report/report_page.h"

#include <cstdio>
#include <ctime>

#include "cli/format.h"
#include "cli/render.h"
#include "cli/render_launches.h"
#include "cli/report/html_text.h"

namespace trellis::cli::report {

namespace {

// Nothing may be loaded from anywhere: the page is read offline, mailed,
// archived. Inline styles are the only thing it needs.
constexpr const char* kPolicy = "default-src 'none'; style-src 'unsafe-inline'";

constexpr const char* kStyle = R"css(
body { font: 14px/1.45 system-ui, sans-serif; color: #222; margin: 24px auto; max-width: 1000px;
       padding: 0 16px; }
h1 { font-size: 22px; margin: 0 0 8px; }
h2 { font-size: 17px; margin: 28px 0 6px; border-bottom: 1px solid #ddd; padding-bottom: 3px; }
code { font: 13px ui-monospace, monospace; }
table { border-collapse: collapse; }
table.facts td { padding: 2px 14px 2px 0; vertical-align: top; }
table.facts td:first-child { color: #666; }
table.list { width: 100%; font-size: 13px; }
table.list th, table.list td { text-align: left; padding: 3px 8px; border-bottom: 1px solid #eee;
                               vertical-align: top; }
table.list th { background: #f5f5f5; }
td.detail { word-break: break-word; color: #444; }
td.time { white-space: nowrap; }
svg.chart { display: block; max-width: 100%; height: auto; background: #fff; }
svg.chart text { font: 11px system-ui, sans-serif; fill: #444; }
svg.chart text.label { font-size: 12px; fill: #222; }
svg.chart .grid { stroke: #e6e6e6; }
svg.chart .axis { stroke: #999; }
svg.chart path.series { stroke-width: 1.6; }
svg.chart path.band { opacity: 0.18; stroke: none; }
svg.chart line.mark { stroke-dasharray: 4 3; stroke-width: 1.2; }
svg.chart line.threshold { stroke-dasharray: 6 4; stroke-width: 1.4; }
svg.chart line.need { stroke-width: 2.5; }
svg.chart text.threshold-label { font-size: 11px; fill: #222; paint-order: stroke;
                                 stroke: #fff; stroke-width: 3px; }
p.lineage { color: #444; margin: 0 0 8px; }
p.note { color: #666; font-size: 12px; margin: 2px 0 0; }
p.empty { color: #666; font-style: italic; border: 1px dashed #ccc; padding: 18px;
          text-align: center; }
.state-SUCCEEDED { color: #2e7d32; } .state-FAILED, .state-CANCELLED { color: #c62828; }
footer { margin-top: 32px; color: #888; font-size: 12px; }
)css";

std::string Fact(const std::string& name, const std::string& html_value) {
  return "<tr><td>" + Escape(name) + "</td><td>" + html_value + "</td></tr>\n";
}

// A CLI line ("goodput    87.3% (...)\n") without its name and newline.
std::string LineValue(std::string line) {
  while (!line.empty() && line.back() == '\n') line.pop_back();
  size_t gap = line.find("  ");
  if (gap == std::string::npos) return line;
  size_t value = line.find_first_not_of(' ', gap);
  return value == std::string::npos ? "" : line.substr(value);
}

std::string ZoneName(const ReportInput& in) {
  if (in.utc) return "UTC";
  std::time_t t = static_cast<std::time_t>(in.generated_ms / 1000);
  std::tm tm{};
  localtime_r(&t, &tm);
  char buf[16];
  std::strftime(buf, sizeof(buf), "%Z", &tm);
  return buf[0] != '\0' ? std::string("local time, ") + buf : "local time";
}

std::string Header(const ReportInput& in) {
  const v1::Run& run = in.run;
  const v1::RunSummary& s = run.summary();
  std::string state = "<span class=\"state-" + Escape(StateName(s.state())) + "\">" +
                      Escape(StateName(s.state())) + "</span>";
  if (!s.state_reason().empty()) state += " &mdash; " + Escape(s.state_reason());
  int ranks = s.nodes() * s.ranks_per_node();
  std::string restarts = LineValue(RenderRestarts(run));
  std::string goodput = LineValue(RenderGoodput(run));
  std::string last = s.last_step() < 0 ? "none yet"
                                       : std::to_string(s.last_step()) + " (loss " +
                                             FormatLoss(s.last_loss()) + ")";
  std::string out = "<header>\n<h1>Run <code>" + Escape(s.run_id()) + "</code></h1>\n";
  // Lineage under the title: a retry or fork is read against its source.
  if (const std::string from = LineageOf(run.spec_toml()); !from.empty())
    out += "<p class=\"lineage\">from " + Escape(from) + "</p>\n";
  out += "<table class=\"facts\">\n";
  out += Fact("name", Escape(s.name()));
  out += Fact("state", state);
  out += Fact("user", Escape(s.user()));
  out += Fact("nodes x ranks", Escape(FormatShape(s.nodes(), s.ranks_per_node()) + " (" +
                                      std::to_string(ranks) + " ranks)"));
  out += Fact("attempts / launches",
              std::to_string(s.attempts()) + " / " + std::to_string(run.launches_size()));
  out += Fact("restarts", Escape(restarts.empty() ? "0" : restarts));
  out += Fact("goodput", Escape(goodput.empty() ? "not available" : goodput));
  out += Fact("last step", Escape(last));
  if (s.unstored_step_records() > 0)
    out += Fact("records", "<span class=\"state-FAILED\">incomplete</span>: " +
                               std::to_string(s.unstored_step_records()) +
                               " step record(s) kept by the workers in the run directory, not "
                               "yet stored (the controller stores them when it can)");
  out += Fact("submitted", Escape(PageTime(in, s.created_unix_ms())));
  out += Fact("updated", Escape(PageTime(in, s.updated_unix_ms())));
  if (!run.run_dir().empty())
    out += Fact("run directory", "<code>" + Escape(run.run_dir()) + "</code>");
  out +=
      Fact("generated", Escape(PageTime(in, in.generated_ms) + " (times in " + ZoneName(in) + ")"));
  return out + "</table>\n</header>\n";
}

}  // namespace

std::string Section(const std::string& id, const std::string& title, const std::string& body_html,
                    const std::string& note) {
  std::string out =
      "<section id=\"" + Escape(id) + "\">\n<h2>" + Escape(title) + "</h2>\n" + body_html;
  if (!note.empty()) out += "<p class=\"note\">" + Escape(note) + "</p>\n";
  return out + "</section>\n";
}

std::string PageTime(const ReportInput& in, int64_t unix_ms) { return FormatTime(unix_ms, in.utc); }

std::string PageStart(const std::string& title) {
  std::string out = "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  out += "<meta http-equiv=\"Content-Security-Policy\" content=\"" + std::string(kPolicy) + "\">\n";
  out += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n";
  out += "<title>" + Escape(title) + "</title>\n";
  return out + "<style>" + std::string(kStyle) + "</style>\n</head>\n<body>\n";
}

std::string PageEnd(const std::string& footer) {
  return "<footer>" + Escape(footer) + "</footer>\n</body>\n</html>\n";
}

std::string RenderReport(const ReportInput& in) {
  const std::string id = in.run.summary().run_id();
  std::string out = PageStart("trellis report: " + id);
  out += Header(in);
  out += StepSections(in);
  out += RanksSection(in);
  out += GateSection(in);
  out += EventsSection(in);
  out += SpecSection(in);
  return out + PageEnd("trellis report " + id + ", " + PageTime(in, in.generated_ms) +
                      ". Hover a point, bar or event line for its values.");
}

}  // namespace trellis::cli::report

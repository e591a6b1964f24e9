#include "cli/report/compare_page.h"

#include <cmath>
#include <limits>
#include <map>

#include "cli/format.h"
#include "cli/render.h"
#include "cli/render_launches.h"
#include "cli/report/html_text.h"
#include "cli/report/report_page.h"
#include "cli/report/svg_chart.h"
#include "common/spec/run_spec.h"
#include "common/spec/spec_writer.h"

namespace trellis::cli::report {

namespace {

// One colour per run, told apart in print too; more runs cycle.
constexpr const char* kPalette[] = {"#1565c0", "#c62828", "#2e7d32",
                                    "#ef6c00", "#6a1b9a", "#00838f"};

std::string Color(size_t i) { return kPalette[i % (sizeof(kPalette) / sizeof(kPalette[0]))]; }

// "section.key" -> value, every key of the spec with its default.
std::map<std::string, std::string> ResolvedKeys(const std::string& spec_toml) {
  std::map<std::string, std::string> out;
  spec::FieldErrors errors;
  auto parsed = spec::ParseRunSpec(spec_toml, &errors);
  if (!parsed) return out;
  for (const auto& [key, value] : spec::ResolvedKeyValues(*parsed)) out[key] = value;
  return out;
}

// One series per run of `value` over its steps.
std::vector<Series> Overlay(const std::vector<ComparedRun>& runs,
                            double (*value)(const v1::StepPoint&)) {
  std::vector<Series> series;
  for (size_t i = 0; i < runs.size(); ++i) {
    Series s;
    s.name = runs[i].run.summary().run_id();
    s.color = Color(i);
    s.css_class = "run" + std::to_string(i);
    if (runs[i].steps)
      for (const auto& p : runs[i].steps->points())
        s.points.push_back({static_cast<double>(p.step()), value(p), false,
                            s.name + ": step " + std::to_string(p.step())});
    series.push_back(std::move(s));
  }
  return series;
}

double Loss(const v1::StepPoint& p) { return p.loss(); }
double StepSeconds(const v1::StepPoint& p) { return p.step_seconds(); }

std::string RunsTable(const std::vector<ComparedRun>& runs) {
  std::string out =
      "<table class=\"list\">\n<tr><th>run</th><th>state</th><th>nodes x ranks</th><th>last "
      "step</th><th>loss</th><th>goodput</th><th>from</th></tr>\n";
  for (size_t i = 0; i < runs.size(); ++i) {
    const v1::Run& run = runs[i].run;
    const v1::RunSummary& s = run.summary();
    std::string goodput = RenderGoodput(run);
    if (const size_t gap = goodput.find("  "); gap != std::string::npos)
      goodput = goodput.substr(goodput.find_first_not_of(' ', gap));
    while (!goodput.empty() && goodput.back() == '\n') goodput.pop_back();
    const std::string from = LineageOf(run.spec_toml());
    out += "<tr><td><span style=\"color:" + Color(i) + "\">&#9632;</span> <code>" +
           Escape(s.run_id()) + "</code></td><td class=\"state-" + Escape(StateName(s.state())) +
           "\">" + Escape(StateName(s.state())) + "</td><td>" +
           Escape(FormatShape(s.nodes(), s.ranks_per_node())) + "</td><td>" +
           (s.last_step() < 0 ? "-" : std::to_string(s.last_step())) + "</td><td>" +
           (s.last_step() < 0 ? "-" : Escape(FormatLoss(s.last_loss()))) + "</td><td>" +
           Escape(goodput.empty() ? "-" : goodput) + "</td><td>" +
           Escape(from.empty() ? "-" : from) + "</td></tr>\n";
  }
  return out + "</table>\n";
}

std::string DifferencesTable(const std::vector<ComparedRun>& runs) {
  std::vector<std::string> specs;
  for (const ComparedRun& r : runs) specs.push_back(r.run.spec_toml());
  const std::vector<SpecDifference> diff = SpecDifferences(specs);
  if (diff.empty()) return "<p class=\"empty\">the specs are the same, defaults counted</p>\n";
  std::string out = "<table class=\"list\">\n<tr><th>key</th>";
  for (const ComparedRun& r : runs) out += "<th>" + Escape(r.run.summary().run_id()) + "</th>";
  out += "</tr>\n";
  for (const SpecDifference& d : diff) {
    out += "<tr><td><code>" + Escape(d.key) + "</code></td>";
    for (const std::string& v : d.values) out += "<td class=\"detail\"><code>" + Escape(v) +
                                                 "</code></td>";
    out += "</tr>\n";
  }
  return out + "</table>\n";
}

}  // namespace

std::vector<SpecDifference> SpecDifferences(const std::vector<std::string>& spec_tomls) {
  std::vector<std::map<std::string, std::string>> keys;
  std::map<std::string, bool> all;
  for (const std::string& t : spec_tomls) {
    keys.push_back(ResolvedKeys(t));
    for (const auto& [k, v] : keys.back()) all[k] = true;
  }
  std::vector<SpecDifference> out;
  for (const auto& [key, unused] : all) {
    SpecDifference d{key, {}};
    for (const auto& k : keys) {
      auto it = k.find(key);
      d.values.push_back(it == k.end() ? "(none)" : it->second);
    }
    bool differ = false;
    for (const std::string& v : d.values) differ = differ || v != d.values.front();
    if (differ) out.push_back(std::move(d));
  }
  return out;
}

std::string RenderComparison(const std::vector<ComparedRun>& runs, int64_t generated_ms,
                             bool utc) {
  std::string ids;
  for (const ComparedRun& r : runs) ids += (ids.empty() ? "" : ", ") + r.run.summary().run_id();
  std::string out = PageStart("trellis report: " + ids);
  out += "<header>\n<h1>Runs compared</h1>\n" + RunsTable(runs) + "</header>\n";
  std::string missing;
  for (const ComparedRun& r : runs)
    if (!r.steps) missing += (missing.empty() ? "" : ", ") + r.run.summary().run_id();
  const std::string note =
      missing.empty() ? "" : "no step history from the controller for " + missing;
  LineChart loss{"loss", "Loss by step", "step", "loss", false, Overlay(runs, Loss), {}};
  out += Section("loss", "Loss", RenderLineChart(loss), note);
  LineChart tps{"tokens", "Tokens per second", "step", "tokens/s", true,
                Overlay(runs, TokensPerSecond), {}};
  out += Section("tokens", "Throughput", RenderLineChart(tps), "");
  LineChart time{"step-time", "Step time (slowest rank)", "step", "seconds", true,
                 Overlay(runs, StepSeconds), {}};
  out += Section("step-time", "Step time", RenderLineChart(time), "");
  out += Section("spec", "Spec differences", DifferencesTable(runs),
                 "every key where the runs' specs differ, their defaults filled in");
  return out + PageEnd("trellis report " + ids + ", " + FormatTime(generated_ms, utc) +
                       ". Hover a point for its values.");
}

}  // namespace trellis::cli::report

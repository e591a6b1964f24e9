#pragma once
// `trellis report`'s page: one self-contained HTML file (inline CSS and SVG,
// no script, no reference to anything outside it; a Content-Security-Policy
// that forbids loading anything). Pure: what the controller said in, the
// page out.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "trellis/v1/controller.pb.h"

namespace trellis::cli::report {

struct ReportInput {
  v1::Run run;  // GetRun: summary, goodput, events, launches, health events
  // Every page of GetRun's ranks (the latest record of each rank), by rank.
  std::vector<v1::RankLatest> ranks;
  // RunSteps; nullopt when the controller could not give it (then steps_note says why).
  std::optional<v1::RunStepsResponse> steps;
  std::string steps_note;
  std::optional<v1::GateReportResponse> gate;  // nullopt: gate_note says why
  std::string gate_note;
  int64_t generated_ms = 0;
  bool utc = false;  // times in UTC instead of local time
};

std::string RenderReport(const ReportInput& in);

// The page's parts, each a <section> (report_steps.cc, report_tables.cc).
std::string StepSections(const ReportInput& in);   // loss, tokens/s, phases, grad norm, lr
std::string RanksSection(const ReportInput& in);   // step time by rank
std::string GateSection(const ReportInput& in);    // host memory at the gate
std::string EventsSection(const ReportInput& in);  // state changes, launches, health
std::string SpecSection(const ReportInput& in);    // the spec, as submitted and resolved

// <section id="ID"><h2>TITLE</h2>BODY<p class="note">NOTE</p></section>: the
// title and note are text (escaped here), the body markup; no note when empty.
std::string Section(const std::string& id, const std::string& title, const std::string& body_html,
                    const std::string& note);

// A step point's tokens over its steps' time; NaN without time.
double TokensPerSecond(const v1::StepPoint& p);

// "2024-05-01 12:03:04" in the page's zone; "-" for 0.
std::string PageTime(const ReportInput& in, int64_t unix_ms);

// The page around the sections: <!DOCTYPE ...><head> with the policy and the
// style, <body>; and the footer and the end.
std::string PageStart(const std::string& title);
std::string PageEnd(const std::string& footer);

}  // namespace trellis::cli::report

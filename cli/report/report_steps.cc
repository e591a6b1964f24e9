// The step charts: loss, tokens/s, phase times, (MoE records) expert load,
// gradient norm and learning rates over steps, with the run's events marked
// where they happened.
#include <algorithm>
#include <cmath>
#include <limits>

#include "cli/format.h"
#include "cli/report/html_text.h"
#include "cli/report/report_page.h"
#include "cli/report/svg_chart.h"
#include "proto/step_record_proto.h"

namespace trellis::cli::report {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr const char* kNoSteps = "no steps recorded";

std::string LaunchName(int attempt, int launch) {
  return std::to_string(attempt) + "." + std::to_string(launch);
}

bool NewLaunch(const v1::StepPoint& prev, const v1::StepPoint& p) {
  return prev.attempt() != p.attempt() || prev.launch() != p.launch();
}

std::string PointName(const v1::StepPoint& p) {
  std::string where = "step " + std::to_string(p.step());
  if (p.steps() > 1)
    where = "steps " + std::to_string(p.first_step()) + "-" + std::to_string(p.step());
  return where + " (launch " + LaunchName(p.attempt(), p.launch()) + ")";
}

// The newest point (of launch `attempt.launch` when given) that had arrived
// by `unix_ms`: where an event happened on the step axis.
const v1::StepPoint* PointAt(const v1::RunStepsResponse& steps, int64_t unix_ms, int attempt = 0,
                             int launch = 0) {
  const v1::StepPoint* found = nullptr;
  for (const auto& p : steps.points()) {
    if (attempt != 0 && (p.attempt() != attempt || p.launch() != launch)) continue;
    if (p.updated_unix_ms() <= unix_ms) found = &p;
  }
  return found;
}

const v1::Launch* FindLaunch(const v1::Run& run, int attempt, int launch) {
  for (const auto& l : run.launches())
    if (l.attempt() == attempt && l.launch() == launch) return &l;
  return nullptr;
}

// Launch starts, the state changes that matter once steps run (a restart, the
// end) and health events, placed at the step they followed.
std::vector<Mark> EventMarks(const ReportInput& in) {
  const v1::RunStepsResponse& steps = *in.steps;
  std::vector<Mark> marks;
  const v1::StepPoint* prev = nullptr;
  for (const auto& p : steps.points()) {
    if (prev != nullptr && NewLaunch(*prev, p)) {
      std::string label = "launch " + LaunchName(p.attempt(), p.launch()) + " starts";
      if (const v1::Launch* before = FindLaunch(in.run, prev->attempt(), prev->launch()))
        label += "; launch " + LaunchName(before->attempt(), before->launch()) + " ended " +
                 (before->failure_class().empty() ? "-" : before->failure_class()) +
                 (before->reason().empty() ? "" : ": " + before->reason());
      marks.push_back({static_cast<double>(p.first_step()), label, "#888888"});
    }
    prev = &p;
  }
  for (const auto& e : in.run.events()) {
    v1::RunState to = e.to();
    if (to != v1::RUN_STATE_RESTARTING && !IsTerminal(to)) continue;
    const v1::StepPoint* at = PointAt(steps, e.unix_ms());
    if (at == nullptr) continue;
    std::string color = to == v1::RUN_STATE_SUCCEEDED ? "#2e7d32" : "#c62828";
    marks.push_back({static_cast<double>(at->step()),
                     PageTime(in, e.unix_ms()) + " " + StateName(e.from()) + " -> " +
                         StateName(to) + (e.reason().empty() ? "" : ": " + e.reason()),
                     to == v1::RUN_STATE_RESTARTING ? "#f28e2b" : color});
  }
  for (const auto& h : in.run.health_events()) {
    const v1::StepPoint* at = PointAt(steps, h.unix_ms(), h.attempt(), h.launch());
    if (at == nullptr) continue;
    marks.push_back({static_cast<double>(at->step()),
                     PageTime(in, h.unix_ms()) + " " + h.kind() + ": " + h.detail(), "#b07aa1"});
  }
  return marks;
}

// One line over the points; gaps where a new launch begins.
Series Line(const v1::RunStepsResponse& steps, std::string name, std::string color,
            std::string css_class, double (*value)(const v1::StepPoint&),
            std::string (*tip)(const v1::StepPoint&, double)) {
  Series s{std::move(name), std::move(color), std::move(css_class), {}, {}};
  const v1::StepPoint* prev = nullptr;
  for (const auto& p : steps.points()) {
    double y = value(p);
    s.points.push_back(
        {static_cast<double>(p.step()), y, prev != nullptr && NewLaunch(*prev, p), tip(p, y)});
    prev = &p;
  }
  return s;
}

std::string Tip(const v1::StepPoint& p, const std::string& what) {
  return PointName(p) + ": " + what;
}

// A chart over steps: its id, title and y axis; the run's events marked.
LineChart StepChart(const char* id, const char* title, const char* y_label,
                    const std::vector<Mark>& marks) {
  LineChart c;
  c.id = id;
  c.title = title;
  c.x_label = "step";
  c.y_label = y_label;
  c.empty_text = kNoSteps;
  c.marks = marks;
  return c;
}

std::string LossChart(const ReportInput& in, const std::vector<Mark>& marks) {
  const v1::RunStepsResponse& steps = *in.steps;
  LineChart c = StepChart("chart-loss", "loss over steps", "loss (mean over ranks)", marks);
  c.empty_text = steps.points().empty() ? kNoSteps : "no finite loss recorded";
  c.series.push_back(Line(
      steps, "loss", "#4e79a7", "loss", [](const v1::StepPoint& p) { return p.loss(); },
      [](const v1::StepPoint& p, double y) {
        return Tip(p, "loss " + FormatLoss(y) + ", " + std::to_string(p.ranks()) + " ranks");
      }));
  if (steps.steps_per_point() > 1) {
    const v1::StepPoint* prev = nullptr;
    for (const auto& p : steps.points()) {
      c.series.back().band.push_back({static_cast<double>(p.step()), p.loss_min(), p.loss_max(),
                                      prev != nullptr && NewLaunch(*prev, p)});
      prev = &p;
    }
  }
  return RenderLineChart(c);
}

std::string TokensChart(const ReportInput& in, const std::vector<Mark>& marks) {
  LineChart c = StepChart("chart-tokens", "tokens per second over steps", "tokens/s", marks);
  c.y_from_zero = true;
  c.series.push_back(Line(*in.steps, "tokens/s", "#59a14f", "tokens", TokensPerSecond,
                          [](const v1::StepPoint& p, double y) {
                            return Tip(p, Compact(y) + " tokens/s, " + std::to_string(p.tokens()) +
                                              " tokens");
                          }));
  return RenderLineChart(c);
}

// A figure of the point's last step (StepPoint carries some of the record's
// optional fields, by the same names), NaN where absent; `field` indexes
// kStepFields.
template <size_t field>
double FigureOrNaN(const v1::StepPoint& p) {
  StepRecord figures;
  ReadStepFigures(p, &figures);
  return kStepFields[field].Number(figures).value_or(kNaN);
}

// True when some point has a finite value: a line worth drawing.
bool AnyFinite(const v1::RunStepsResponse& steps, double (*value)(const v1::StepPoint&)) {
  return std::any_of(steps.points().begin(), steps.points().end(),
                     [&](const v1::StepPoint& p) { return std::isfinite(value(p)); });
}

std::string PhaseTip(const v1::StepPoint& p, double y) { return Tip(p, Seconds(y)); }

std::string PhaseChart(const ReportInput& in, const std::vector<Mark>& marks) {
  const v1::RunStepsResponse& steps = *in.steps;
  LineChart c = StepChart("chart-phases", "step phase times over steps", "seconds", marks);
  c.y_from_zero = true;
  c.series.push_back(Line(
      steps, "step (slowest rank)", "#333333", "phase-step",
      [](const v1::StepPoint& p) {
        return p.steps() > 0 ? p.step_seconds_sum() / p.steps() : p.step_seconds();
      },
      PhaseTip));
  struct Phase {
    const char* name;
    const char* key;  // of the line's id, phase-<key>
    const char* color;
    double (*value)(const v1::StepPoint&);
  };
  const Phase phases[] = {
      {"fwd", "fwd", "#4e79a7", FigureOrNaN<StepFieldIndex("fwd_seconds")>},
      {"bwd", "bwd", "#f28e2b", FigureOrNaN<StepFieldIndex("bwd_seconds")>},
      {"optim", "optim", "#59a14f", FigureOrNaN<StepFieldIndex("optim_seconds")>},
      {"comm", "comm", "#e15759", FigureOrNaN<StepFieldIndex("comm_seconds")>},
      // What of comm the compute waited for: the rest was hidden behind it.
      {"exposed comm", "exposed", "#b07aa1", FigureOrNaN<StepFieldIndex("exposed_comm_seconds")>},
  };
  for (const Phase& ph : phases)
    if (AnyFinite(steps, ph.value))
      c.series.push_back(
          Line(steps, ph.name, ph.color, std::string("phase-") + ph.key, ph.value, PhaseTip));
  return RenderLineChart(c);
}

bool HasLoad(const v1::StepPoint& p) {
  return std::isfinite(FigureOrNaN<StepFieldIndex("expert_load_max_over_mean")>(p)) ||
         std::isfinite(FigureOrNaN<StepFieldIndex("ep_load_max_over_mean")>(p));
}

// The MoE routing of each point's last step: busiest EP rank and busiest
// expert over the mean (1 is even). Only for runs whose records carry it.
std::string LoadChart(const ReportInput& in, const std::vector<Mark>& marks) {
  const v1::RunStepsResponse& steps = *in.steps;
  LineChart c = StepChart("chart-load", "expert load over steps", "busiest over mean", marks);
  auto tip = [](const v1::StepPoint& p, double y) { return Tip(p, FormatRatio(y)); };
  const auto ep = FigureOrNaN<StepFieldIndex("ep_load_max_over_mean")>;
  const auto experts = FigureOrNaN<StepFieldIndex("expert_load_max_over_mean")>;
  if (AnyFinite(steps, ep))
    c.series.push_back(Line(steps, "EP ranks", "#e15759", "load-ep", ep, tip));
  if (AnyFinite(steps, experts))
    c.series.push_back(Line(steps, "experts", "#4e79a7", "load-experts", experts, tip));
  return RenderLineChart(c);
}

// The optimizer's view of each point's last step: the gradient norm before
// clipping and the learning rates. Only for runs whose records carry them.
std::string GradNormChart(const ReportInput& in, const std::vector<Mark>& marks) {
  LineChart c = StepChart("chart-grad-norm", "gradient norm over steps", "L2 norm", marks);
  c.y_from_zero = true;
  c.series.push_back(Line(*in.steps, "grad norm", "#76b7b2", "grad-norm",
                          FigureOrNaN<StepFieldIndex("grad_norm")>,
                          [](const v1::StepPoint& p, double y) {
                            return Tip(p, "grad norm " + FormatLoss(y));
                          }));
  return RenderLineChart(c);
}

std::string LrChart(const ReportInput& in, const std::vector<Mark>& marks) {
  const v1::RunStepsResponse& steps = *in.steps;
  LineChart c = StepChart("chart-lr", "learning rates over steps", "learning rate", marks);
  c.y_from_zero = true;
  auto tip = [](const v1::StepPoint& p, double y) { return Tip(p, "lr " + Compact(y)); };
  const auto muon = FigureOrNaN<StepFieldIndex("muon_lr")>;
  const auto adamw = FigureOrNaN<StepFieldIndex("lr")>;
  if (AnyFinite(steps, muon))
    c.series.push_back(Line(steps, "Muon (matrices)", "#e15759", "lr-muon", muon, tip));
  if (AnyFinite(steps, adamw))
    c.series.push_back(Line(steps, "AdamW (embedding, head, router, norms)", "#4e79a7",
                            "lr-adamw", adamw, tip));
  return RenderLineChart(c);
}

std::string FoldNote(const v1::RunStepsResponse& steps, const std::string& folded) {
  if (steps.points().empty()) return "";
  std::string out = Grouped(steps.total_steps()) + " step summaries stored";
  if (steps.steps_per_point() <= 1) return out + "; a point per step.";
  return out + "; each point folds " + Grouped(steps.steps_per_point()) +
         " consecutive steps: " + folded;
}

}  // namespace

double TokensPerSecond(const v1::StepPoint& p) {
  return p.step_seconds_sum() > 0 ? static_cast<double>(p.tokens()) / p.step_seconds_sum() : kNaN;
}

std::string StepSections(const ReportInput& in) {
  if (!in.steps) {
    std::string why = "<p class=\"empty\">" + Escape(in.steps_note) + "</p>\n";
    return Section("loss", "Loss", why, "") + Section("throughput", "Tokens per second", why, "") +
           Section("phases", "Step phase times", why, "");
  }
  std::vector<Mark> marks = EventMarks(in);
  const v1::RunStepsResponse& steps = *in.steps;
  std::string marks_note =
      marks.empty() ? "" : " Dashed lines: launches starting, restarts, the end, health events.";
  return Section("loss", "Loss", LossChart(in, marks),
                 FoldNote(steps,
                          "the line is each fold's last step, the band its lowest and "
                          "highest.") +
                     marks_note) +
         Section("throughput", "Tokens per second", TokensChart(in, marks),
                 FoldNote(steps, "tokens over step time of each fold.") +
                     " Tokens summed over the ranks, over the slowest rank's step time.") +
         Section("phases", "Step phase times", PhaseChart(in, marks),
                 FoldNote(steps, "the step line is the fold's mean, the phases its last step's.") +
                     " Phases are one rank's (the step's latest record); the step is the "
                     "slowest rank's.") +
         (std::any_of(steps.points().begin(), steps.points().end(), HasLoad)
              ? Section("load", "Expert load", LoadChart(in, marks),
                        FoldNote(steps, "each fold's last step.") +
                            " The step's MoE routing, the worst layer: the busiest EP rank's "
                            "token-expert pairs over the mean EP rank's (what the slowest GPU "
                            "pays; EP > 1 only) and the busiest expert's over the mean "
                            "expert's. 1 is even.")
              : "") +
         (AnyFinite(steps, FigureOrNaN<StepFieldIndex("grad_norm")>)
              ? Section("grad-norm", "Gradient norm", GradNormChart(in, marks),
                        FoldNote(steps, "each fold's last step.") +
                            " The global L2 norm of the step's gradients, before clipping.")
              : "") +
         (AnyFinite(steps, FigureOrNaN<StepFieldIndex("lr")>)
              ? Section("lr", "Learning rate", LrChart(in, marks),
                        FoldNote(steps, "each fold's last step.") +
                            " The rates the step's optimizer used, after warmup and decay.")
              : "");
}

}  // namespace trellis::cli::report

#include "cli/render.h"

#include <algorithm>
#include <cstdio>
#include <vector>

#include "absl/strings/str_join.h"
#include "cli/format.h"
#include "cli/render_launches.h"
#include "common/spec/run_spec.h"
#include "common/spec/spec_writer.h"
#include "proto/step_record_proto.h"

namespace trellis::cli {

namespace {

std::string StepText(int64_t step) { return step < 0 ? "-" : std::to_string(step); }

// The end of `s` in `width` bytes, "..." first when cut: a path's step is
// at its end.
std::string TailOf(const std::string& s, size_t width) {
  if (s.size() <= width) return s;
  size_t from = s.size() - (width - 3);
  while (from < s.size() && (static_cast<unsigned char>(s[from]) & 0xC0) == 0x80) ++from;
  return "..." + s.substr(from);
}

// "2024-05-01 12:03:04 (3m ago)".
std::string TimeAndAge(int64_t unix_ms, const TextOptions& opt) {
  if (unix_ms == 0) return "-";
  return FormatTime(unix_ms, opt.utc) + " (" + FormatAge(opt.now_ms, unix_ms) + " ago)";
}

void RenderAttempts(const v1::Run& run, const TextOptions& opt, std::string* out) {
  *out += "\nattempts\n";
  if (run.attempts().empty()) *out += "  (none yet)\n";
  for (const auto& a : run.attempts()) {
    std::string ended = a.ended_unix_ms() != 0
                            ? "exit " + std::to_string(a.exit_code()) + ", " + OrDash(a.end_reason())
                        : a.waiting() ? "waiting ahead, eligible " +
                                            (a.begin_unix_ms() == 0
                                                 ? std::string("now")
                                                 : "from " + FormatTime(a.begin_unix_ms(), opt.utc))
                                      : "live";
    *out += "  #" + std::to_string(a.attempt()) + "  slurm job " + OrDash(a.slurm_job_id()) +
            "  launches " + std::to_string(a.launches()) + "  " + ended + "\n";
    *out += "      nodes      " + OrDash(absl::StrJoin(a.nodes(), ",")) + "\n";
    *out += "      submitted  " + FormatTime(a.submitted_unix_ms(), opt.utc) + "\n";
    *out += "      ended      " + FormatTime(a.ended_unix_ms(), opt.utc) + "\n";
    *out += "      sbatch     " + OrDash(absl::StrJoin(a.sbatch_args(), " ")) + "\n";
  }
}

// The run's spare pool jobs (restart.spare_pool_nodes), where it has any.
void RenderSparePool(const v1::Run& run, const TextOptions& opt, std::string* out) {
  if (run.spare_pool_jobs().empty()) return;
  *out += "\nspare pool\n";
  for (const auto& p : run.spare_pool_jobs()) {
    std::string nodes = absl::StrJoin(p.nodes(), ",");
    std::string what =
        p.drawn_attempt() > 0
            ? "drawn into relaunch " + std::to_string(p.drawn_attempt()) + "." +
                  std::to_string(p.drawn_launch()) + " (" + OrDash(nodes) + ")"
        : p.standing_unix_ms() != 0 ? "standing on " + OrDash(nodes) + " since " +
                                          FormatTime(p.standing_unix_ms(), opt.utc)
        : p.slurm_job_id().empty()  ? "submitted " + FormatTime(p.submitted_unix_ms(), opt.utc)
                                    : "queued since " + FormatTime(p.submitted_unix_ms(), opt.utc);
    if (p.ended_unix_ms() != 0)
      what += (p.drawn_attempt() > 0 || p.slurm_job_id().empty() ? "; " : ", never drawn; ") +
              std::string("ended ") + FormatTime(p.ended_unix_ms(), opt.utc) + ": " +
              OrDash(p.end_reason());
    *out += "  #" + std::to_string(p.pool()) + "  slurm job " + OrDash(p.slurm_job_id()) + "  " +
            std::to_string(p.nodes_asked()) + (p.nodes_asked() == 1 ? " node" : " nodes") + "  " +
            what + "\n";
  }
}

// "QUEUED -> RUNNING"; a state to itself (the run's first event, a reason
// why it waits) is the state alone.
std::string FromTo(const v1::RunEvent& e) {
  return e.from() == e.to() ? StateName(e.to()) : StateName(e.from()) + " -> " + StateName(e.to());
}

// Evidence longer than this is cut in the table (`show --json` has it whole).
constexpr size_t kEvidenceColumn = 60;

void RenderEvents(const v1::Run& run, const TextOptions& opt, std::string* out) {
  *out += "\nevents\n";
  if (run.events().empty()) {
    *out += "  (none)\n";
    return;
  }
  Table t({"TIME", "FROM -> TO", "REASON", "EVIDENCE"});
  for (const auto& e : run.events()) {
    std::string evidence = e.evidence_json();
    if (evidence.empty() || evidence == "{}") evidence = "-";
    if (evidence.size() > kEvidenceColumn)
      evidence = evidence.substr(0, kEvidenceColumn - 3) + "...";
    t.AddRow({FormatTime(e.unix_ms(), opt.utc), FromTo(e), OrDash(e.reason()), evidence});
  }
  *out += t.Render();
}

// The GPU columns (render.h), each a field of the record's table, in table
// order: whether a row shows it, its header, and how its value reads.
struct StepColumn {
  bool StepColumns::*shown;
  const char* header;
  size_t field;  // in kStepFields
  std::string (*format)(double value);
};
constexpr StepColumn kColumns[] = {
    {&StepColumns::retries, "RETRIES", StepFieldIndex("alloc_retries"),
     [](double v) { return std::to_string(static_cast<int64_t>(v)); }},
    {&StepColumns::reserved, "RESV_PEAK_GIB", StepFieldIndex("mem_reserved_peak_bytes"),
     [](double v) { return FormatGiB(static_cast<int64_t>(v)); }},
    {&StepColumns::ctas, "NCCL_CTAS", StepFieldIndex("nccl_max_ctas"),
     [](double v) { return std::to_string(static_cast<int64_t>(v)); }},
    {&StepColumns::expert_load, "EXPERT_LOAD", StepFieldIndex("expert_load_max_over_mean"),
     FormatRatio},
    {&StepColumns::ep_load, "EP_LOAD", StepFieldIndex("ep_load_max_over_mean"), FormatRatio},
};

std::vector<std::string> ColumnNames(StepColumns c) {
  std::vector<std::string> out;
  for (const StepColumn& col : kColumns)
    if (c.*col.shown) out.push_back(col.header);
  return out;
}
// A step's values in the shown columns ("-" where its record has none); `r`
// null: a step without a record.
std::vector<std::string> ColumnValues(const v1::StepRecord* r, StepColumns c) {
  const StepRecord record = r ? FromProto(*r) : StepRecord{};
  std::vector<std::string> out;
  for (const StepColumn& col : kColumns) {
    if (!(c.*col.shown)) continue;
    std::optional<double> v = r ? kStepFields[col.field].Number(record) : std::nullopt;
    out.push_back(v ? col.format(*v) : "-");
  }
  return out;
}
std::vector<std::string> ColumnValues(const v1::StepSummary& step, StepColumns c) {
  return ColumnValues(step.has_last() ? &step.last() : nullptr, c);
}

StepColumns ColumnsOfRecord(const v1::StepRecord& r) {
  const StepRecord record = FromProto(r);
  StepColumns c;
  for (const StepColumn& col : kColumns) c.*col.shown = kStepFields[col.field].Has(record);
  return c;
}

void RenderSteps(const v1::Run& run, std::string* out) {
  *out += "\nrecent steps\n";
  if (run.recent_steps().empty()) {
    *out += "  (none yet)\n";
    return;
  }
  StepColumns columns;
  for (const auto& s : run.recent_steps()) columns |= ColumnsOf(s);
  std::vector<std::string> header{"ATTEMPT", "LAUNCH", "STEP",  "LOSS",
                                  "TOKENS/S", "STEP_S", "RANKS"};
  for (auto& name : ColumnNames(columns)) header.push_back(name);
  Table t(std::move(header));
  for (const auto& s : run.recent_steps()) {
    std::vector<std::string> row{std::to_string(s.attempt()), std::to_string(s.launch()),
                                 std::to_string(s.step()),    FormatLoss(s.loss()),
                                 FormatRate(s.tokens(), s.step_seconds()),
                                 FormatSeconds(s.step_seconds()), std::to_string(s.ranks())};
    for (auto& value : ColumnValues(s, columns)) row.push_back(value);
    t.AddRow(std::move(row));
  }
  *out += t.Render();
}

// The latest record of each rank, where GetRun returned them and a record
// has a GPU figure: the figures rank by rank (one rank short of memory, or
// with retries, stands out), with when each arrived (an old one is a rank
// gone quiet).
void RenderRanks(const v1::Run& run, const TextOptions& opt, std::string* out) {
  StepColumns columns;
  for (const auto& r : run.ranks()) columns |= ColumnsOfRecord(r.record());
  // The routing figures are the step's, the same on every rank: the step
  // tables have them.
  columns.expert_load = columns.ep_load = false;
  if (run.ranks().empty() || !columns.any()) return;
  const v1::RankLatest& first = run.ranks(0);
  *out += "\nranks (latest record of each; attempt " + std::to_string(first.attempt()) +
          ", launch " + std::to_string(first.launch()) + "; " +
          std::to_string(run.ranks_reported()) + " of " + std::to_string(run.ranks_world()) +
          " reported)\n";
  std::vector<std::string> header{"RANK", "NODE", "STEP", "STEP_S"};
  for (auto& name : ColumnNames(columns)) header.push_back(name);
  header.push_back("SEEN");
  Table t(std::move(header));
  for (const auto& r : run.ranks()) {
    std::vector<std::string> row{std::to_string(r.rank()), OrDash(r.node()),
                                 std::to_string(r.record().step()),
                                 FormatSeconds(r.record().step_seconds())};
    for (auto& value : ColumnValues(&r.record(), columns)) row.push_back(value);
    row.push_back(r.received_unix_ms() == 0 ? "-"
                                            : FormatAge(opt.now_ms, r.received_unix_ms()) + " ago");
    t.AddRow(std::move(row));
  }
  *out += t.Render();
  if (run.ranks_next() > 0)
    *out += "(more ranks: trellis show " + run.summary().run_id() + " --ranks-from " +
            std::to_string(run.ranks_next()) + ")\n";
}

// Fixed widths of the live table's GPU columns: each its name's.
std::string FixedColumns(const std::vector<std::string>& values, StepColumns c) {
  std::string out;
  const std::vector<std::string> names = ColumnNames(c);
  for (size_t i = 0; i < values.size(); ++i) {
    char buf[64];
    std::snprintf(buf, sizeof(buf), "  %*s", static_cast<int>(names[i].size()), values[i].c_str());
    out += buf;
  }
  return out;
}

}  // namespace

std::string RenderRunList(const v1::ListRunsResponse& list, const TextOptions& opt) {
  // FROM only when a run has one: lists of fresh runs read as they always did.
  const bool lineage = std::any_of(list.runs().begin(), list.runs().end(),
                                   [](const v1::RunSummary& s) { return !s.init_from().empty(); });
  std::vector<std::string> header = {"RUN", "STATE", "NODES", "ATTEMPTS", "STEP", "LOSS", "AGE"};
  if (lineage) header.push_back("FROM");
  header.push_back("REASON");
  Table t(std::move(header));
  for (const auto& s : list.runs()) {
    std::vector<std::string> row = {s.run_id(),
                                    StateName(s.state()),
                                    FormatShape(s.nodes(), s.ranks_per_node()),
                                    std::to_string(s.attempts()),
                                    StepText(s.last_step()),
                                    s.last_step() < 0 ? "-" : FormatLoss(s.last_loss()),
                                    FormatAge(opt.now_ms, s.created_unix_ms())};
    if (lineage) row.push_back(OrDash(TailOf(s.init_from(), kFromWidth)));
    row.push_back(Truncate(s.state_reason(), kReasonWidth));
    t.AddRow(std::move(row));
  }
  return t.Render();
}

std::string LineageOf(const std::string& spec_toml) {
  spec::FieldErrors errors;
  auto spec = spec::ParseRunSpec(spec_toml, &errors);
  return spec && spec->has_model ? spec::DescribeInitFrom(spec->trainer.training) : "";
}

std::string RenderRun(const v1::Run& run, const TextOptions& opt) {
  const v1::RunSummary& s = run.summary();
  std::string out;
  out += "run        " + s.run_id() + (s.name().empty() ? "" : " (" + s.name() + ")") + "\n";
  out += "state      " + StateName(s.state()) +
         (s.state_reason().empty() ? "" : ": " + s.state_reason()) + "\n";
  out += "user       " + OrDash(s.user()) + "\n";
  out += "nodes      " + std::to_string(s.nodes()) + " x " + std::to_string(s.ranks_per_node()) +
         " ranks\n";
  out += "run dir    " + OrDash(run.run_dir()) + "\n";
  if (const std::string from = LineageOf(run.spec_toml()); !from.empty())
    out += "from       " + from + "\n";
  out += "created    " + TimeAndAge(s.created_unix_ms(), opt) + "\n";
  out += "updated    " + TimeAndAge(s.updated_unix_ms(), opt) + "\n";
  out += "last step  " + StepText(s.last_step()) +
         (s.last_step() < 0 ? "" : "  loss " + FormatLoss(s.last_loss())) + "\n";
  if (s.unstored_step_records() > 0)
    out += "records    incomplete: " + std::to_string(s.unstored_step_records()) +
           " step record(s) kept by the workers in the run directory, not yet stored (the "
           "controller stores them when it can)\n";
  if (s.hang_timeout_s() > 0) {
    char secs[32];
    std::snprintf(secs, sizeof(secs), "%.1f s", s.hang_timeout_s());
    out += "hang after " + std::string(secs) + " without a step: " + s.hang_timeout_basis() + "\n";
  }
  out += RenderRestarts(run);
  out += RenderGoodput(run);
  out += RenderCheckpointInterval(run);
  RenderAttempts(run, opt, &out);
  RenderSparePool(run, opt, &out);
  out += RenderLaunches(run, opt);
  out += RenderHealthEvents(run, opt);
  RenderEvents(run, opt, &out);
  RenderSteps(run, &out);
  RenderRanks(run, opt, &out);
  return out;
}

std::string RenderWatchHeader(const v1::Run& run, const TextOptions& opt) {
  const v1::RunSummary& s = run.summary();
  std::string out = "run " + s.run_id() + "  " + StateName(s.state());
  if (!s.state_reason().empty()) out += " (" + s.state_reason() + ")";
  out += "  " + std::to_string(s.nodes()) + " x " + std::to_string(s.ranks_per_node()) + " ranks";
  out += "  attempts " + std::to_string(s.attempts());
  out += "  created " + FormatAge(opt.now_ms, s.created_unix_ms()) + " ago\n";
  return out;
}

std::string RenderTransition(const v1::RunEvent& event, const TextOptions& opt) {
  std::string time = FormatTime(event.unix_ms(), opt.utc);
  if (time.size() > 11) time = time.substr(11);  // the time of day is enough while watching
  std::string out = time + "  " + FromTo(event);
  if (!event.reason().empty()) out += "  " + event.reason();
  return out + "\n";
}

StepColumns ColumnsOf(const v1::StepSummary& step) {
  return step.has_last() ? ColumnsOfRecord(step.last()) : StepColumns{};
}

std::string RenderStepHeader(std::optional<int64_t> total_steps, StepColumns columns) {
  char buf[128];
  std::snprintf(buf, sizeof(buf), "%8s  %10s  %10s  %8s  %5s", "STEP", "LOSS", "TOKENS/S", "STEP_S",
                "RANKS");
  std::string out = buf;
  out += FixedColumns(ColumnNames(columns), columns);
  if (total_steps) out += "  PROGRESS";
  return out + "\n";
}

std::string RenderStepRow(const v1::StepSummary& step, std::optional<int64_t> total_steps,
                          StepColumns columns) {
  char buf[128];
  std::snprintf(buf, sizeof(buf), "%8lld  %10s  %10s  %8s  %5d",
                static_cast<long long>(step.step()), FormatLoss(step.loss()).c_str(),
                FormatRate(step.tokens(), step.step_seconds()).c_str(),
                FormatSeconds(step.step_seconds()).c_str(), step.ranks());
  std::string out = buf;
  out += FixedColumns(ColumnValues(step, columns), columns);
  if (total_steps) out += "  " + ProgressBar(step.step(), *total_steps, 20);
  return out + "\n";
}

std::string ProgressBar(int64_t done, int64_t total, int width) {
  if (total <= 0 || width <= 0) return "";
  int64_t clamped = std::clamp<int64_t>(done, 0, total);
  int marks = static_cast<int>(clamped * width / total);
  int percent = static_cast<int>(clamped * 100 / total);
  char pct[8];
  std::snprintf(pct, sizeof(pct), "%3d%%", percent);
  return "[" + std::string(marks, '#') + std::string(width - marks, '.') + "] " + pct;
}

std::optional<int64_t> TotalSteps(const std::string& spec_toml) {
  spec::FieldErrors errors;
  auto parsed = spec::ParseRunSpec(spec_toml, &errors);
  if (!parsed || !parsed->has_model) return std::nullopt;
  return parsed->trainer.training.steps;
}

}  // namespace trellis::cli

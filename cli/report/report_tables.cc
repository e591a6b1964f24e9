// Step time by rank, host memory at the gate, and the run's events.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "cli/format.h"
#include "cli/render_launches.h"
#include "cli/report/html_text.h"
#include "cli/report/report_page.h"
#include "cli/report/svg_chart.h"
#include "common/node_probe.h"

namespace trellis::cli::report {

namespace {

constexpr double kGiB = 1024.0 * 1024 * 1024;
// A gate of more sockets than this shows those with the least free memory.
constexpr size_t kMaxGateBars = kMaxChartPoints / 2;

std::string Cell(const std::string& text, const char* css = nullptr) {
  return std::string(css ? "<td class=\"" + std::string(css) + "\">" : "<td>") + Escape(text) +
         "</td>";
}

std::string Launch(int attempt, int launch) {
  return std::to_string(attempt) + "." + std::to_string(launch);
}

std::string GiBText(double bytes) { return Compact(bytes / kGiB) + " GiB"; }

// "22 go, 1 standby; node5 fail (socket 1: ...)": how many nodes got each
// decision, then every node that was neither picked nor standing by, with
// its reasons (a gate of 1,536 nodes stays one readable cell).
std::string GateNodes(const v1::GateRecord& gate) {
  std::vector<std::pair<std::string, int>> counts;
  std::string odd;
  for (const auto& n : gate.nodes()) {
    auto it = std::find_if(counts.begin(), counts.end(),
                           [&](const auto& c) { return c.first == n.decision(); });
    if (it == counts.end())
      counts.push_back({n.decision(), 1});
    else
      ++it->second;
    if (n.decision() == "go" || n.decision() == "standby") continue;
    std::string reasons;
    for (const auto& r : n.reasons()) reasons += (reasons.empty() ? "" : "; ") + r;
    odd += "; " + n.node() + " " + n.decision() + (reasons.empty() ? "" : " (" + reasons + ")");
  }
  std::string out;
  for (const auto& [decision, count] : counts)
    out += (out.empty() ? "" : ", ") + std::to_string(count) + " " + decision;
  return out + odd;
}

}  // namespace

std::string RanksSection(const ReportInput& in) {
  const auto& ranks = in.ranks;
  BarChart c;
  c.id = "chart-ranks";
  c.title = "step time of each rank's latest record";
  c.x_label = "rank";
  c.y_label = "step time (seconds)";
  c.groups = {{"step time", "#4e79a7"}};
  c.empty_text =
      "no rank records: the controller keeps each rank's latest record in memory, so there are "
      "none after its restart or for a run that ended long ago";
  std::vector<double> seconds;
  for (const auto& r : ranks) seconds.push_back(r.record().step_seconds());
  Groups groups = GroupMax(seconds, kMaxChartPoints);
  for (size_t g = 0; g < groups.max.size(); ++g) {
    const v1::RankLatest& first = ranks[groups.first[g]];
    size_t last_index = std::min(ranks.size(), groups.first[g] + groups.size) - 1;
    if (groups.size == 1) {
      c.bars.push_back({std::to_string(first.rank()),
                        {groups.max[g]},
                        "rank " + std::to_string(first.rank()) + " on " + first.node() + ": step " +
                            std::to_string(first.record().step()) + ", " +
                            Seconds(first.record().step_seconds()) + ", loss " +
                            FormatLoss(first.record().loss()) + ", received " +
                            PageTime(in, first.received_unix_ms())});
    } else {
      std::string span =
          std::to_string(first.rank()) + "-" + std::to_string(ranks[last_index].rank());
      c.bars.push_back(
          {span, {groups.max[g]}, "ranks " + span + ": slowest " + Seconds(groups.max[g])});
    }
  }
  std::string note;
  if (!ranks.empty()) {
    const v1::RankLatest& r = ranks.front();
    note = "The latest record of each rank (attempt " + std::to_string(r.attempt()) + ", launch " +
           std::to_string(r.launch()) + "; " + std::to_string(in.run.ranks_reported()) + " of " +
           std::to_string(in.run.ranks_world()) + " ranks reported).";
    if (groups.size > 1)
      note += " Each bar is the slowest of " + std::to_string(groups.size) + " ranks.";
  }
  return Section("ranks", "Step time by rank", RenderBarChart(c), note);
}

std::string GateSection(const ReportInput& in) {
  if (!in.gate)
    return Section("gate", "Host memory at the gate",
                   "<p class=\"empty\">" + Escape(in.gate_note) + "</p>\n", "");
  const auto& gates = in.gate->gates();
  if (gates.empty())
    return Section("gate", "Host memory at the gate",
                   "<p class=\"empty\">no gate has decided yet</p>\n", "");
  // The newest gate in the chart, every gate in the table below it.
  const v1::GateRecord& g = gates[gates.size() - 1];
  BarChart c;
  c.id = "chart-gate";
  c.title = "free and unattributed host memory per socket at the gate";
  c.x_label = "node/socket";
  c.y_label = "GiB";
  c.groups = {{"free", "#59a14f"}, {"unattributed", "#e15759"}};
  c.empty_text = "no socket figures (every probe failed or no node registered)";
  // The policy's thresholds; a run with a [model] also counts its ranks' host
  // memory on the socket each is bound to (a mark on each bar).
  double min_free = NAN, rank_host_gib = NAN;
  int ranks_per_node = 0;
  nlohmann::json policy = nlohmann::json::parse(g.policy_json(), nullptr, false);
  if (policy.is_object()) {
    auto number = [&](const char* key) {
      auto it = policy.find(key);
      return it != policy.end() && it->is_number() ? it->get<double>() : NAN;
    };
    min_free = number("min_free_gib_per_socket");
    double max_unattributed = number("max_unattributed_gib_per_socket");
    c.lines.push_back({min_free, "min free " + Compact(min_free) + " GiB", "#2e7d32"});
    c.lines.push_back(
        {max_unattributed, "max unattributed " + Compact(max_unattributed) + " GiB", "#c62828"});
    rank_host_gib = number("rank_host_gib");
    const double per_node = number("ranks_per_node");
    if (per_node >= 1 && per_node <= 1e6) ranks_per_node = static_cast<int>(per_node);
    if (std::isfinite(rank_host_gib) && rank_host_gib > 0)
      c.need = {"min free + its ranks' host memory (" + Compact(rank_host_gib) + " GiB a rank)",
                "#1b5e20"};
  }
  struct SocketBar {
    Bar bar;
    double free;
    size_t order;
  };
  std::vector<SocketBar> sockets;
  for (const auto& n : g.nodes()) {
    std::string reasons;
    for (const auto& r : n.reasons()) reasons += (reasons.empty() ? "" : "; ") + r;
    const int count = n.probe().sockets_size();
    for (int i = 0; i < count; ++i) {
      const v1::SocketProbe& s = n.probe().sockets(i);
      double free = static_cast<double>(s.free_bytes());
      Bar bar{n.node() + "/" + std::to_string(s.numa_node()),
              {free / kGiB, static_cast<double>(s.unattributed_bytes()) / kGiB},
              n.node() + " socket " + std::to_string(s.numa_node()) + " (" + n.decision() +
                  "): " + GiBText(free) + " free, " +
                  GiBText(static_cast<double>(s.unattributed_bytes())) + " unattributed of " +
                  GiBText(static_cast<double>(s.total_bytes()))};
      if (!c.need.name.empty() && ranks_per_node > 0 && std::isfinite(min_free)) {
        const int ranks = RanksOnSocket(i, ranks_per_node, count);
        bar.need = min_free + ranks * rank_host_gib;
        bar.tip += "; needs " + GiBText(bar.need * kGiB) + " with its " + std::to_string(ranks) +
                   " rank" + (ranks == 1 ? "" : "s");
      }
      if (!reasons.empty()) bar.tip += "; " + reasons;
      sockets.push_back({std::move(bar), free, sockets.size()});
    }
  }
  std::string note = "Gate of attempt " + std::to_string(g.attempt()) + ", launch " +
                     std::to_string(g.launch()) + ": " + g.decision() + " at " +
                     PageTime(in, g.unix_ms()) + " (" + g.reason() + ").";
  if (sockets.size() > kMaxGateBars) {
    std::sort(sockets.begin(), sockets.end(),
              [](const SocketBar& a, const SocketBar& b) { return a.free < b.free; });
    sockets.resize(kMaxGateBars);
    std::sort(sockets.begin(), sockets.end(),
              [](const SocketBar& a, const SocketBar& b) { return a.order < b.order; });
    note += " The " + std::to_string(kMaxGateBars) + " sockets with the least free memory.";
  }
  for (auto& s : sockets) c.bars.push_back(std::move(s.bar));
  std::string table =
      "<table class=\"list\" id=\"gates\">\n<tr><th>attempt.launch</th><th>time</th>"
      "<th>decision</th><th>reason</th><th>nodes</th></tr>\n";
  for (const auto& gate : gates) {
    table += "<tr>" + Cell(Launch(gate.attempt(), gate.launch())) +
             Cell(PageTime(in, gate.unix_ms()), "time") + Cell(gate.decision()) +
             Cell(gate.reason()) + Cell(GateNodes(gate), "detail") + "</tr>\n";
  }
  table += "</table>\n";
  return Section("gate", "Host memory at the gate", RenderBarChart(c) + table, note);
}

namespace {

struct EventRow {
  int64_t unix_ms = 0;
  std::string kind;
  std::string launch;
  std::string what;
  std::string detail;
};

std::string LaunchWhat(const v1::Launch& l) {
  std::string out = "on " + ShortNodeList(l.nodes());
  if (l.ended_unix_ms() == 0) return out + "; running";
  out += "; ended " + (l.failure_class().empty() ? std::string("-") : l.failure_class()) +
         ", exit " + std::to_string(l.exit_code());
  if (l.started_unix_ms() != 0)
    out += ", after " +
           FormatDuration(std::chrono::milliseconds(l.ended_unix_ms() - l.started_unix_ms()));
  if (!l.blamed_node().empty()) out += "; blamed " + l.blamed_node();
  if (!l.recovery().empty())
    out += "; then " + (l.recovery() == "new_attempt" ? std::string("new attempt") : l.recovery());
  return out;
}

}  // namespace

std::string EventsSection(const ReportInput& in) {
  std::vector<EventRow> rows;
  for (const auto& e : in.run.events()) {
    std::string evidence = EvidenceSummary(e.evidence_json());
    rows.push_back({e.unix_ms(), "state", "", StateName(e.from()) + " -> " + StateName(e.to()),
                    e.reason() + (evidence.empty() ? "" : " [" + evidence + "]")});
  }
  for (const auto& l : in.run.launches()) {
    std::string evidence = EvidenceSummary(l.evidence_json());
    std::string detail = l.reason();
    if (!evidence.empty())
      detail += (detail.empty() ? "" : " [") + evidence + (detail.empty() ? "" : "]");
    rows.push_back(
        {l.started_unix_ms(), "launch", Launch(l.attempt(), l.launch()), LaunchWhat(l), detail});
  }
  for (const auto& h : in.run.health_events()) {
    std::string who =
        h.rank() >= 0 ? "rank " + std::to_string(h.rank()) + " on " + h.node() : "node " + h.node();
    rows.push_back(
        {h.unix_ms(), "health: " + h.kind(), Launch(h.attempt(), h.launch()), who, h.detail()});
  }
  std::stable_sort(rows.begin(), rows.end(),
                   [](const EventRow& a, const EventRow& b) { return a.unix_ms < b.unix_ms; });
  if (rows.empty()) return Section("events", "Events", "<p class=\"empty\">no events</p>\n", "");
  std::string table =
      "<table class=\"list\" id=\"events-table\">\n<tr><th>time</th><th>kind</th>"
      "<th>attempt.launch</th><th>what</th><th>reason and evidence</th></tr>\n";
  for (const auto& r : rows)
    table += "<tr>" + Cell(PageTime(in, r.unix_ms), "time") + Cell(r.kind) +
             Cell(r.launch.empty() ? "-" : r.launch) + Cell(r.what) + Cell(r.detail, "detail") +
             "</tr>\n";
  table += "</table>\n";
  return Section("events", "Events", table,
                 "State changes, launches (how each ended and what followed) and health events; "
                 "the controller keeps a run's newest " +
                     std::to_string(kHealthEventsKept) + " health events.");
}

}  // namespace trellis::cli::report

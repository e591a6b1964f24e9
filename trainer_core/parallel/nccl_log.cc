#include "trainer_core/parallel/nccl_log.h"

#include <algorithm>
#include <cctype>

namespace trellis::train {
namespace {

constexpr std::string_view kInfo = "NCCL INFO ";
constexpr std::string_view kColl = " coll channels";
constexpr std::string_view kPerPeer = " p2p channels per peer";
constexpr size_t kMaxDigits = 9;

// The decimal number that ends right before `end` in `line`, preceded by a
// space or the start of the text; nullopt when there is none.
std::optional<int64_t> NumberBefore(std::string_view line, size_t end) {
  size_t begin = end;
  while (begin > 0 && std::isdigit(static_cast<unsigned char>(line[begin - 1]))) --begin;
  if (begin == end || end - begin > kMaxDigits) return std::nullopt;
  if (begin > 0 && line[begin - 1] != ' ') return std::nullopt;
  int64_t v = 0;
  for (size_t i = begin; i < end; ++i) v = v * 10 + (line[i] - '0');
  return v;
}

// One line: "<prefix> NCCL INFO <n> coll channels, ..., <m> p2p channels per peer".
std::optional<NcclChannels> ParseLine(std::string_view line) {
  const size_t info = line.find(kInfo);
  if (info == std::string_view::npos) return std::nullopt;
  const std::string_view message = line.substr(info + kInfo.size());
  const size_t coll = message.find(kColl);
  if (coll == std::string_view::npos) return std::nullopt;
  // The count opens the message: "24 coll channels".
  const std::string_view head = message.substr(0, coll);
  if (head.empty() || head.size() > kMaxDigits ||
      !std::all_of(head.begin(), head.end(),
                   [](char c) { return std::isdigit(static_cast<unsigned char>(c)); }))
    return std::nullopt;
  NcclChannels out;
  out.coll = *NumberBefore(message, coll);
  out.communicators = 1;
  const size_t peer = message.find(kPerPeer, coll);
  if (peer != std::string_view::npos) out.p2p_per_peer = NumberBefore(message, peer);
  return out;
}

std::string Upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

bool Set(const std::optional<std::string>& v) { return v && !v->empty(); }

}  // namespace

std::optional<NcclChannels> ParseNcclChannels(std::string_view log) {
  std::optional<NcclChannels> out;
  while (!log.empty()) {
    const size_t nl = log.find('\n');
    const std::string_view line = log.substr(0, nl);
    log = nl == std::string_view::npos ? std::string_view() : log.substr(nl + 1);
    if (auto c = ParseLine(line)) out = out ? MergeNcclChannels(*out, *c) : *c;
  }
  return out;
}

NcclChannels MergeNcclChannels(const NcclChannels& a, const NcclChannels& b) {
  NcclChannels out;
  out.coll = std::max(a.coll, b.coll);
  out.communicators = a.communicators + b.communicators;
  if (a.p2p_per_peer || b.p2p_per_peer)
    out.p2p_per_peer = std::max(a.p2p_per_peer.value_or(0), b.p2p_per_peer.value_or(0));
  return out;
}

std::string ExpandNcclDebugFile(const std::string& pattern, const std::string& host, int pid) {
  const std::string short_host = host.substr(0, host.find('.'));
  std::string out;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] != '%' || i + 1 == pattern.size()) {
      out += pattern[i];
      continue;
    }
    const char c = pattern[++i];
    if (c == 'h')
      out += short_host;
    else if (c == 'p')
      out += std::to_string(pid);
    else if (c == '%')
      out += '%';
    else
      out += std::string{'%', c};
  }
  return out;
}

bool NcclSubsysLogsInit(const std::optional<std::string>& subsys) {
  if (!subsys) return true;  // NCCL's default includes INIT
  std::string list = Upper(*subsys);
  const bool invert = !list.empty() && list[0] == '^';
  if (invert) list.erase(0, 1);
  bool named = false;  // INIT (or ALL) is in the list
  size_t at = 0;
  while (at <= list.size()) {
    size_t comma = list.find(',', at);
    if (comma == std::string::npos) comma = list.size();
    const std::string item = list.substr(at, comma - at);
    named = named || item == "INIT" || item == "ALL";
    at = comma + 1;
  }
  return invert ? !named : named;
}

NcclLogPlan PlanNcclLog(const NcclLogEnv& env, const std::string& own_file,
                        const std::string& host, int pid) {
  NcclLogPlan plan;
  if (!Set(env.debug)) {
    plan.set = {{"NCCL_DEBUG", "INFO"}, {"NCCL_DEBUG_SUBSYS", "INIT"}, {"NCCL_DEBUG_FILE", own_file}};
    plan.follow = own_file;
    plan.note = "NCCL's log (INFO, INIT) goes to " + own_file;
    return plan;
  }
  if (!Set(env.debug_file)) {
    plan.note = "NCCL_DEBUG=" + *env.debug +
                " without NCCL_DEBUG_FILE: NCCL logs to standard output, so nccl_max_ctas is "
                "not reported";
    return plan;
  }
  const std::string file = ExpandNcclDebugFile(*env.debug_file, host, pid);
  const std::string level = Upper(*env.debug);
  if (level != "INFO" && level != "ABORT" && level != "TRACE") {
    plan.note = "NCCL_DEBUG=" + *env.debug + " logs no INFO lines to " + file +
                ", so nccl_max_ctas is not reported";
    return plan;
  }
  if (!NcclSubsysLogsInit(env.debug_subsys)) {
    plan.note = "NCCL_DEBUG_SUBSYS=" + *env.debug_subsys + " leaves INIT out of " + file +
                ", so nccl_max_ctas is not reported";
    return plan;
  }
  plan.follow = file;
  plan.note = "NCCL's log goes to " + file + " (NCCL_DEBUG_FILE)";
  return plan;
}

NcclBlockingWaitPlan PlanNcclBlockingWait(const NcclBlockingWaitEnv& env) {
  auto off = [](const std::optional<std::string>& v) {
    if (!Set(v)) return true;
    const std::string u = Upper(*v);
    return u == "N" || u == "NO" || u == "0" || u == "F" || u == "FALSE";
  };
  NcclBlockingWaitPlan plan;
  std::string found;
  for (auto [name, value] : {std::pair{"TORCH_NCCL_BLOCKING_WAIT", &env.torch_name},
                             std::pair{"NCCL_BLOCKING_WAIT", &env.old_name}})
    if (!off(*value)) found += std::string(found.empty() ? "" : " and ") + name + "=" + **value;
  if (found.empty()) return plan;
  plan.turn_off = true;
  plan.note = found +
              " turned off for this rank (TORCH_NCCL_BLOCKING_WAIT=0): it makes every NCCL "
              "collective hold the host where it starts, so none would overlap compute and "
              "the exposed-communication figures would be wrong; a stuck peer is still named "
              "by the peer watch within the collective timeout (TRELLIS_COMM_TIMEOUT_S)";
  return plan;
}

}  // namespace trellis::train

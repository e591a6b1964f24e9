#include "worker/core/memory_probe.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <limits>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"

namespace trellis::worker {
namespace {

// Any kB figure must still fit int64 once multiplied into bytes.
constexpr int64_t kMaxKb = std::numeric_limits<int64_t>::max() / 1024;
// No machine has CPU ids beyond this; a larger one is a corrupt file.
constexpr int64_t kMaxCpuId = 1 << 20;

struct FieldSpec {
  absl::string_view name;
  int64_t NodeMeminfo::*member;
  bool kb;  // " kB" unit (the hugetlb counters have none)
};

constexpr std::array<FieldSpec, 9> kFields = {{
    {"MemTotal", &NodeMeminfo::mem_total_kb, true},
    {"MemFree", &NodeMeminfo::mem_free_kb, true},
    {"FilePages", &NodeMeminfo::file_pages_kb, true},
    {"AnonPages", &NodeMeminfo::anon_pages_kb, true},
    {"Slab", &NodeMeminfo::slab_kb, true},
    {"KernelStack", &NodeMeminfo::kernel_stack_kb, true},
    {"PageTables", &NodeMeminfo::page_tables_kb, true},
    {"Shmem", &NodeMeminfo::shmem_kb, true},
    {"HugePages_Total", &NodeMeminfo::hugepages_total, false},
}};

bool IsDigits(absl::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// Digits only (no sign, no spaces) into [0, max].
bool ParseBounded(absl::string_view s, int64_t max, int64_t* out) {
  uint64_t v = 0;
  if (!IsDigits(s) || !absl::SimpleAtoi(s, &v) || v > static_cast<uint64_t>(max)) return false;
  *out = static_cast<int64_t>(v);
  return true;
}

absl::string_view TrimLeadingBlanks(absl::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  return s;
}

struct MeminfoLine {
  int64_t node = 0;
  absl::string_view field;
  int64_t value = 0;
  bool kb = false;
};

// "Node 0 MemTotal:       125829120 kB" (the column padding varies).
bool SplitMeminfoLine(absl::string_view line, MeminfoLine* out) {
  constexpr absl::string_view kNode = "Node ";
  if (line.substr(0, kNode.size()) != kNode) return false;
  line.remove_prefix(kNode.size());
  size_t space = line.find(' ');
  if (space == absl::string_view::npos || !ParseBounded(line.substr(0, space), 1 << 20, &out->node))
    return false;
  line.remove_prefix(space + 1);
  size_t colon = line.find(':');
  if (colon == 0 || colon == absl::string_view::npos) return false;
  out->field = line.substr(0, colon);
  if (out->field.find_first_of(" \t") != absl::string_view::npos) return false;
  absl::string_view value = TrimLeadingBlanks(line.substr(colon + 1));
  constexpr absl::string_view kUnit = " kB";
  out->kb = value.size() > kUnit.size() && value.substr(value.size() - kUnit.size()) == kUnit;
  if (out->kb) value.remove_suffix(kUnit.size());
  return ParseBounded(value, kMaxKb, &out->value);
}

// Saturating sums and products of the (non-negative) byte figures: a corrupt
// file's counts must not overflow int64. What saturates is clamped below like
// any other overshoot of used memory.
int64_t SatAdd(int64_t a, int64_t b) {
  int64_t r = 0;
  return __builtin_add_overflow(a, b, &r) ? std::numeric_limits<int64_t>::max() : r;
}
int64_t SatMul(int64_t a, int64_t b) {
  int64_t r = 0;
  return __builtin_mul_overflow(a, b, &r) ? std::numeric_limits<int64_t>::max() : r;
}

absl::Status CheckSize(absl::string_view text, absl::string_view path) {
  if (text.size() > kMaxSysfsFileBytes)
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": larger than ", kMaxSysfsFileBytes, " bytes; not a sysfs file"));
  if (text.empty()) return absl::InvalidArgumentError(absl::StrCat(path, ": empty file"));
  if (text.back() != '\n')
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": truncated (the last line has no newline)"));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<NodeMeminfo> ParseNodeMeminfo(absl::string_view text, int node_id,
                                             absl::string_view path) {
  if (absl::Status st = CheckSize(text, path); !st.ok()) return st;
  text.remove_suffix(1);
  NodeMeminfo m;
  std::array<bool, kFields.size()> seen{};
  int line_no = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_no;
    MeminfoLine l;
    if (!SplitMeminfoLine(line, &l))
      return absl::InvalidArgumentError(absl::StrCat(path, " line ", line_no, ": expected \"Node ",
                                                     node_id, " <Field>: <number> kB\", got \"",
                                                     line.substr(0, 80), "\""));
    if (l.node != node_id)
      return absl::InvalidArgumentError(absl::StrCat(path, " line ", line_no, " (", l.field,
                                                     "): names node ", l.node, ", expected ",
                                                     node_id));
    for (size_t i = 0; i < kFields.size(); ++i) {
      const FieldSpec& f = kFields[i];
      if (l.field != f.name) continue;
      if (seen[i])
        return absl::InvalidArgumentError(
            absl::StrCat(path, " line ", line_no, ": field ", f.name, " appears twice"));
      if (l.kb != f.kb)
        return absl::InvalidArgumentError(
            absl::StrCat(path, " line ", line_no, ": field ", f.name,
                         f.kb ? " lacks its kB unit" : " has a unit"));
      seen[i] = true;
      m.*f.member = l.value;
    }
  }
  for (size_t i = 0; i < kFields.size(); ++i)
    if (!seen[i])
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": required field ", kFields[i].name, " is missing"));
  if (m.mem_free_kb > m.mem_total_kb)
    return absl::InvalidArgumentError(absl::StrCat(path, ": MemFree ", m.mem_free_kb,
                                                   " kB exceeds MemTotal ", m.mem_total_kb, " kB"));
  return m;
}

absl::StatusOr<CpuList> ParseCpulist(absl::string_view text, absl::string_view path) {
  if (absl::Status st = CheckSize(text, path); !st.ok()) return st;
  text.remove_suffix(1);
  CpuList out;
  out.text = std::string(text);
  if (text.empty()) return out;
  int64_t next = 0;  // the lowest id the next range may start at
  for (absl::string_view range : absl::StrSplit(text, ',')) {
    const size_t dash = range.find('-');
    const bool single = dash == absl::string_view::npos;
    int64_t lo = 0, hi = 0;
    bool ok = ParseBounded(range.substr(0, dash), kMaxCpuId, &lo) &&
              (single ? (hi = lo, true) : ParseBounded(range.substr(dash + 1), kMaxCpuId, &hi));
    if (!ok || hi < lo || lo < next)
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": bad CPU range \"", range.substr(0, 40),
                       "\" (expected ascending, non-overlapping ranges like 0-3,8-11)"));
    out.count += static_cast<int>(hi - lo + 1);
    next = hi + 1;
  }
  return out;
}

absl::StatusOr<int64_t> ParseHugepageDirName(absl::string_view name) {
  constexpr absl::string_view kPrefix = "hugepages-", kSuffix = "kB";
  int64_t kb = 0;
  if (name.size() > kPrefix.size() + kSuffix.size() && name.substr(0, kPrefix.size()) == kPrefix &&
      name.substr(name.size() - kSuffix.size()) == kSuffix &&
      ParseBounded(name.substr(kPrefix.size(), name.size() - kPrefix.size() - kSuffix.size()),
                   kMaxKb, &kb) &&
      kb > 0)
    return kb * 1024;
  return absl::InvalidArgumentError(
      absl::StrCat("\"", name.substr(0, 60), "\" is not a hugepages-<size>kB directory"));
}

int64_t HugepagesBytes(const NodeMeminfo& meminfo, const std::map<int64_t, int64_t>& per_size,
                       int64_t default_size) {
  if (per_size.empty()) return SatMul(meminfo.hugepages_total, default_size);
  int64_t total = 0;
  for (const auto& [size, count] : per_size) total = SatAdd(total, SatMul(size, count));
  return total;
}

SocketProbe MakeSocket(int numa_node, const CpuList& cpus, const NodeMeminfo& m,
                       int64_t hugepages_bytes) {
  SocketProbe s;
  s.numa_node = numa_node;
  s.cpulist = cpus.text;
  s.total_bytes = m.mem_total_kb * 1024;
  s.free_bytes = m.mem_free_kb * 1024;
  s.file_pages_bytes = m.file_pages_kb * 1024;
  s.anon_pages_bytes = m.anon_pages_kb * 1024;
  s.slab_bytes = m.slab_kb * 1024;
  s.kernel_stack_bytes = m.kernel_stack_kb * 1024;
  s.page_tables_bytes = m.page_tables_kb * 1024;
  s.shmem_bytes = m.shmem_kb * 1024;
  s.hugepages_bytes = hugepages_bytes;
  // Shmem is not added: it is already inside FilePages.
  int64_t attributed = 0;
  for (int64_t part : {s.file_pages_bytes, s.anon_pages_bytes, s.slab_bytes,
                       s.kernel_stack_bytes, s.page_tables_bytes, s.hugepages_bytes})
    attributed = SatAdd(attributed, part);
  // Clamped: the counters are read at slightly different instants and may
  // overshoot used memory by a few pages.
  s.unattributed_bytes = std::max<int64_t>(0, (s.total_bytes - s.free_bytes) - attributed);
  return s;
}

DeviceMemoryProbe MakeDeviceMemory(int numa_node, const NodeMeminfo& m) {
  return {numa_node, m.mem_total_kb * 1024, m.mem_free_kb * 1024};
}

std::string ResolveSysfsRoot(const std::string& flag, const char* env_value,
                             const std::string& node_name) {
  if (!flag.empty()) return flag;
  if (env_value != nullptr && *env_value != '\0')
    return absl::StrReplaceAll(env_value, {{"%n", node_name}});
  return "/sys";
}

std::string FormatGib(int64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f", static_cast<double>(bytes) / (1024.0 * 1024 * 1024));
  return buf;
}

}  // namespace trellis::worker

#include "common/spec/spec_overrides.h"

#include <algorithm>
#include <sstream>

#include <toml++/toml.h>

#include "common/spec/run_spec.h"
#include "common/spec/spec_writer.h"
#include "common/spec/table_reader.h"

namespace trellis::spec {
namespace {

bool IsKeyPart(std::string_view part) {
  return !part.empty() && std::all_of(part.begin(), part.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '_' || c == '-';
  });
}

std::vector<std::string> SplitKey(std::string_view key) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    size_t dot = key.find('.', start);
    parts.emplace_back(key.substr(start, dot == std::string_view::npos ? dot : dot - start));
    if (dot == std::string_view::npos) break;
    start = dot + 1;
  }
  return parts;
}

struct Assignment {
  std::string text;  // as given
  std::vector<std::string> path;
  std::string value;
};

// Sets path = node in root, making the tables on the way; "" or the error.
std::string Set(toml::table& root, const Assignment& a, toml::node&& node) {
  toml::table* t = &root;
  for (size_t i = 0; i + 1 < a.path.size(); ++i) {
    toml::node* next = t->get(a.path[i]);
    if (next == nullptr) {
      t->insert(a.path[i], toml::table{});
      next = t->get(a.path[i]);
    }
    if (!next->is_table()) {
      std::string prefix = a.path[0];
      for (size_t j = 1; j <= i; ++j) prefix += "." + a.path[j];
      return prefix + " is a value, not a section";
    }
    t = next->as_table();
  }
  toml::node* existing = t->get(a.path.back());
  if (existing != nullptr && existing->is_table())
    return "is a section; set one of its keys (" + a.text.substr(0, a.text.find('=')) +
           ".KEY=VALUE)";
  t->insert_or_assign(a.path.back(), std::move(node));
  return "";
}

void SetValue(toml::table& root, const Assignment& a, bool as_string, FieldErrors* errors) {
  std::string error;
  if (!as_string) {
    try {
      toml::table parsed = toml::parse("v = " + a.value);
      if (toml::node* v = parsed.get("v")) {
        // Moved out of its table by kind (toml++ nodes are not copyable as such).
        v->visit([&](auto&& n) {
          using N = std::decay_t<decltype(n)>;
          if constexpr (toml::is_table<N> || toml::is_array<N>) {
            error = Set(root, a, N(n));
          } else {
            error = Set(root, a, toml::value<typename N::value_type>(n.get()));
          }
        });
        if (!error.empty()) errors->push_back({a.text, error});
        return;
      }
    } catch (const toml::parse_error&) {
      // Not a TOML value: a bare word, a path, a command line.
    }
  }
  error = Set(root, a, toml::value<std::string>(a.value));
  if (!error.empty()) errors->push_back({a.text, error});
}

std::string Format(const toml::table& root) {
  std::ostringstream o;
  o << toml::toml_formatter(root);
  return o.str() + "\n";
}

// Every "section.key" a spec may set ([env] aside), from the resolved spec of
// a [model] run, which writes them all.
std::vector<std::string> AllKeys() {
  RunSpec all;
  all.has_model = true;
  std::vector<std::string> keys;
  for (const auto& [key, value] : ResolvedKeyValues(all)) keys.push_back(key);
  return keys;
}

// "slurm.nodes" for "nodes": the sections' keys of that name, or near it.
std::string SectionsOf(const std::string& key) {
  std::string found;
  std::vector<std::string> names;
  for (const std::string& k : AllKeys()) {
    std::string name = k.substr(k.find('.') + 1);
    if (name == key) found += (found.empty() ? "" : " or ") + k;
    names.push_back(name);
  }
  if (!found.empty()) return found;
  const std::string near = NearestWord(key, names);
  for (const std::string& k : AllKeys())
    if (!near.empty() && k.substr(k.find('.') + 1) == near)
      found += (found.empty() ? "" : " or ") + k;
  return found;
}

size_t EditDistance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

}  // namespace

std::optional<std::string> ApplyOverridesKeepingOpening(std::string_view toml_text,
                                                        const std::vector<std::string>& assignments,
                                                        const std::string& comment,
                                                        FieldErrors* errors) {
  auto rewritten = ApplyOverrides(toml_text, assignments, errors);
  if (!rewritten) return std::nullopt;
  std::string opening;
  for (size_t at = 0; at < toml_text.size() && toml_text[at] == '#';) {
    size_t end = toml_text.find('\n', at);
    if (end == std::string_view::npos) end = toml_text.size();
    opening += std::string(toml_text.substr(at, end - at)) + "\n";
    at = end + 1;
  }
  return opening + comment + *rewritten;
}

std::string NearestWord(std::string_view word, const std::vector<std::string>& accepted) {
  std::string best;
  size_t best_d = std::max<size_t>(1, std::min<size_t>(3, word.size() / 3));
  for (const std::string& w : accepted) {
    size_t d = EditDistance(word, w);
    if (d <= best_d && (best.empty() || d < EditDistance(word, best))) best = w;
  }
  return best;
}

std::optional<std::string> ApplyOverrides(std::string_view toml_text,
                                          const std::vector<std::string>& assignments,
                                          FieldErrors* errors) {
  const size_t before = errors->size();
  std::vector<Assignment> parsed;
  for (const std::string& text : assignments) {
    size_t eq = text.find('=');
    std::string key = text.substr(0, eq);
    std::vector<std::string> path = SplitKey(key);
    if (eq == std::string::npos || !std::all_of(path.begin(), path.end(), IsKeyPart)) {
      errors->push_back({text, "is not KEY=VALUE with a dotted key such as slurm.nodes=2 or "
                               "env.NCCL_DEBUG=INFO"});
      continue;
    }
    if (path.size() < 2) {
      const std::string in = SectionsOf(key);
      errors->push_back({text, "a key needs its section (SECTION.KEY=VALUE)" +
                                   (in.empty() ? std::string() : ": did you mean " + in + "?")});
      continue;
    }
    parsed.push_back({text, std::move(path), text.substr(eq + 1)});
  }
  if (errors->size() != before) return std::nullopt;
  std::optional<toml::table> parsed_text = ParseSpecToml(toml_text, errors);
  if (!parsed_text) return std::nullopt;
  toml::table& root = *parsed_text;
  for (const Assignment& a : parsed) SetValue(root, a, /*as_string=*/false, errors);
  if (errors->size() != before) return std::nullopt;
  // Typed by the spec: where the value as TOML read it is refused and the
  // same text as a string is not (job.name=007, slurm.time_limit=00:30:00,
  // env.THREADS=8), the string is meant.
  auto errors_on = [](const toml::table& t, const std::string& key) {
    FieldErrors checks;
    ParseRunSpec(Format(t), &checks);
    return std::count_if(checks.begin(), checks.end(),
                         [&](const FieldError& e) { return e.field == key; });
  };
  for (const Assignment& a : parsed) {
    std::string key = a.path[0];
    for (size_t i = 1; i < a.path.size(); ++i) key += "." + a.path[i];
    if (errors_on(root, key) == 0) continue;
    toml::table as_string = root;
    FieldErrors ignored;
    SetValue(as_string, a, /*as_string=*/true, &ignored);
    if (ignored.empty() && errors_on(as_string, key) == 0) root = std::move(as_string);
  }
  return Format(root);
}

}  // namespace trellis::spec

#include "common/spec/table_reader.h"

#include <sstream>

#include "common/spec/spec_overrides.h"

namespace trellis::spec {

std::optional<toml::table> ParseSpecToml(std::string_view text, FieldErrors* errors) {
  try {
    return toml::parse(text, std::string_view("spec"));
  } catch (const toml::parse_error& e) {
    errors->push_back({"spec", "TOML syntax error at line " +
                                   std::to_string(e.source().begin.line) + ", column " +
                                   std::to_string(e.source().begin.column) + ": " +
                                   std::string(e.description())});
    return std::nullopt;
  }
}

std::string JoinErrors(const FieldErrors& errors) {
  std::string out;
  for (const auto& e : errors) {
    if (!out.empty()) out += "; ";
    out += e.field + ": " + e.message;
  }
  return out;
}

namespace {
std::string TypeName(const toml::node& n) {
  switch (n.type()) {
    case toml::node_type::string: return "a string";
    case toml::node_type::integer: return "an integer";
    case toml::node_type::floating_point: return "a float";
    case toml::node_type::boolean: return "a boolean";
    case toml::node_type::array: return "an array";
    case toml::node_type::table: return "a table";
    default: return "a date/time";
  }
}
}  // namespace

TableReader::TableReader(const toml::table* table, std::string section, FieldErrors* errors)
    : table_(table), section_(std::move(section)), errors_(errors) {}

std::string TableReader::FieldName(std::string_view key) const {
  return section_.empty() ? std::string(key) : section_ + "." + std::string(key);
}

void TableReader::Error(std::string_view key, std::string message) {
  errors_->push_back({FieldName(key), std::move(message)});
}

bool TableReader::Has(std::string_view key) const {
  return table_ != nullptr && table_->contains(key);
}

const toml::node* TableReader::Get(std::string_view key) {
  seen_.emplace(key);
  if (table_ == nullptr) return nullptr;
  return table_->get(key);
}

void TableReader::Known(std::string_view key) { seen_.emplace(key); }

void TableReader::Int(std::string_view key, int64_t* out, int64_t min, int64_t max,
                      bool required) {
  const toml::node* n = Get(key);
  std::ostringstream want;
  want << "must be an integer in [" << min << ", " << max << "]";
  if (n == nullptr) {
    if (required) Error(key, "is required; " + want.str());
    return;
  }
  auto v = n->value_exact<int64_t>();
  if (!v) {
    Error(key, want.str() + ", got " + TypeName(*n));
    return;
  }
  if (*v < min || *v > max) {
    Error(key, want.str() + ", got " + std::to_string(*v));
    return;
  }
  *out = *v;
}

void TableReader::Int(std::string_view key, int* out, int min, int max, bool required) {
  int64_t v = *out;
  Int(key, &v, min, max, required);
  *out = static_cast<int>(v);
}

void TableReader::Double(std::string_view key, double* out, double min, double max,
                         bool required) {
  const toml::node* n = Get(key);
  std::ostringstream want;
  want << "must be a number in [" << min << ", " << max << "]";
  if (n == nullptr) {
    if (required) Error(key, "is required; " + want.str());
    return;
  }
  std::optional<double> v;
  if (auto i = n->value_exact<int64_t>()) v = static_cast<double>(*i);
  if (auto d = n->value_exact<double>()) v = *d;
  if (!v) {
    Error(key, want.str() + ", got " + TypeName(*n));
    return;
  }
  if (!(*v >= min && *v <= max)) {
    std::ostringstream got;
    got << *v;
    Error(key, want.str() + ", got " + got.str());
    return;
  }
  *out = *v;
}

void TableReader::Bool(std::string_view key, bool* out) {
  const toml::node* n = Get(key);
  if (n == nullptr) return;
  auto v = n->value_exact<bool>();
  if (!v) {
    Error(key, "must be true or false, got " + TypeName(*n));
    return;
  }
  *out = *v;
}

void TableReader::String(std::string_view key, std::string* out, size_t max_len,
                         bool required) {
  const toml::node* n = Get(key);
  if (n == nullptr) {
    if (required) Error(key, "is required");
    return;
  }
  auto v = n->value_exact<std::string>();
  if (!v) {
    Error(key, "must be a string, got " + TypeName(*n));
    return;
  }
  if (v->size() > max_len) {
    Error(key, "must be at most " + std::to_string(max_len) + " characters, got " +
                   std::to_string(v->size()));
    return;
  }
  if (required && v->empty()) {
    Error(key, "must not be empty");
    return;
  }
  *out = *v;
}

void TableReader::StringList(std::string_view key, std::vector<std::string>* out,
                             size_t max_items, size_t max_len) {
  const toml::node* n = Get(key);
  if (n == nullptr) return;
  const toml::array* arr = n->as_array();
  if (arr == nullptr) {
    Error(key, "must be an array of strings, got " + TypeName(*n));
    return;
  }
  if (arr->size() > max_items) {
    Error(key, "must have at most " + std::to_string(max_items) + " entries, got " +
                   std::to_string(arr->size()));
    return;
  }
  std::vector<std::string> values;
  for (size_t i = 0; i < arr->size(); ++i) {
    auto v = (*arr)[i].value_exact<std::string>();
    std::string where = "entry " + std::to_string(i);
    if (!v) {
      Error(key, where + " must be a string, got " + TypeName((*arr)[i]));
      return;
    }
    if (v->size() > max_len) {
      Error(key, where + " must be at most " + std::to_string(max_len) + " characters");
      return;
    }
    values.push_back(*v);
  }
  *out = std::move(values);
}

void TableReader::StringMap(std::string_view key, std::map<std::string, std::string>* out,
                            size_t max_items, size_t max_len) {
  const toml::node* n = Get(key);
  if (n == nullptr) return;
  const toml::table* t = n->as_table();
  if (t == nullptr) {
    Error(key, "must be a table of strings, got " + TypeName(*n));
    return;
  }
  if (t->size() > max_items) {
    Error(key, "must have at most " + std::to_string(max_items) + " entries");
    return;
  }
  for (const auto& [k, v] : *t) {
    auto s = v.value_exact<std::string>();
    std::string field = std::string(key) + "." + std::string(k.str());
    if (!s) {
      Error(field, "must be a string, got " + TypeName(v));
      continue;
    }
    if (s->size() > max_len) {
      Error(field, "must be at most " + std::to_string(max_len) + " characters");
      continue;
    }
    (*out)[std::string(k.str())] = *s;
  }
}

void TableReader::Finish() {
  if (table_ == nullptr) return;
  for (const auto& [k, v] : *table_) {
    if (seen_.count(k.str()) == 0) {
      std::string known;
      for (const auto& s : seen_) known += (known.empty() ? "" : ", ") + s;
      const std::string near =
          NearestWord(k.str(), std::vector<std::string>(seen_.begin(), seen_.end()));
      Error(k.str(), "unknown key" + (near.empty() ? "" : " (did you mean " + near + "?)") +
                         "; accepted keys: " + known);
    }
  }
}

}  // namespace trellis::spec

#pragma once
// Strict, typed reading of one TOML table: every read records a FieldError on a
// wrong type or range, and Finish() reports keys nobody asked for.

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <toml++/toml.h>

#include "common/spec/field_errors.h"

namespace trellis::spec {

// The spec's text as TOML, or a FieldError on "spec" with the line and
// column of the syntax error.
std::optional<toml::table> ParseSpecToml(std::string_view text, FieldErrors* errors);

class TableReader {
 public:
  // `table` may be null (section absent): reads then keep their defaults.
  TableReader(const toml::table* table, std::string section, FieldErrors* errors);

  bool present() const { return table_ != nullptr; }
  bool Has(std::string_view key) const;

  // Absent keys leave *out unchanged unless `required` is set.
  void Int(std::string_view key, int64_t* out, int64_t min, int64_t max, bool required = false);
  void Int(std::string_view key, int* out, int min, int max, bool required = false);
  void Double(std::string_view key, double* out, double min, double max, bool required = false);
  void Bool(std::string_view key, bool* out);
  // Strings are bounded in length; an empty string is an error when required.
  void String(std::string_view key, std::string* out, size_t max_len, bool required = false);
  void StringList(std::string_view key, std::vector<std::string>* out, size_t max_items,
                  size_t max_len);
  // A sub-table whose values are all strings (e.g. [env]).
  void StringMap(std::string_view key, std::map<std::string, std::string>* out, size_t max_items,
                 size_t max_len);
  // Marks a key as known without reading it (read elsewhere).
  void Known(std::string_view key);

  // Records an error for every key that was neither read nor marked Known().
  void Finish();

  void Error(std::string_view key, std::string message);
  std::string FieldName(std::string_view key) const;

 private:
  const toml::node* Get(std::string_view key);

  const toml::table* table_;
  std::string section_;
  FieldErrors* errors_;
  std::set<std::string, std::less<>> seen_;
};

}  // namespace trellis::spec

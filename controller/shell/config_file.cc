#include "controller/shell/config_file.h"

#include <toml++/toml.h>

#include "common/spec/spec_overrides.h"

namespace trellis::controller {

namespace {

// The options a config file may set: all but --help, --version, --config,
// the modes (--config-reference, --check) and the hidden ones.
std::vector<const CLI::Option*> ConfigurableOptions(const CLI::App& app) {
  std::vector<const CLI::Option*> out;
  for (const CLI::Option* o : app.get_options()) {
    if (o->get_lnames().empty() || o->get_group().empty()) continue;
    const std::string& name = o->get_lnames().front();
    if (name == "help" || name == "version" || name == "config" || name == "config-reference" ||
        name == "check")
      continue;
    out.push_back(o);
  }
  return out;
}

enum class KeyType { kString, kInteger, kNumber, kBoolean, kStrings };

KeyType TypeOf(const CLI::Option* o) {
  if (o->get_expected_max() == 0) return KeyType::kBoolean;  // a flag: no value
  if (o->get_expected_max() > 1) return KeyType::kStrings;
  const std::string type = o->get_type_name().substr(0, o->get_type_name().find(':'));
  if (type == "INT" || type == "UINT") return KeyType::kInteger;
  if (type == "FLOAT") return KeyType::kNumber;
  return KeyType::kString;
}

const char* TypeName(KeyType t) {
  switch (t) {
    case KeyType::kString:
      return "string";
    case KeyType::kInteger:
      return "integer";
    case KeyType::kNumber:
      return "number";
    case KeyType::kBoolean:
      return "boolean";
    case KeyType::kStrings:
      return "list of strings";
  }
  return "";
}

// The flags for one key's value; false when the value is not of `type`.
bool FlagsOf(const std::string& flag, KeyType type, const toml::node& value,
             std::vector<std::string>* out) {
  switch (type) {
    case KeyType::kBoolean:
      if (!value.is_boolean()) return false;
      // false too: a flag may default to true (certify-return).
      out->push_back(value.value<bool>().value_or(false) ? flag : flag + "=false");
      return true;
    case KeyType::kInteger:
      if (!value.is_integer()) return false;
      out->insert(out->end(), {flag, std::to_string(*value.value<int64_t>())});
      return true;
    case KeyType::kNumber:
      if (!value.is_number()) return false;
      out->insert(out->end(), {flag, std::to_string(*value.value<double>())});
      return true;
    case KeyType::kString:
      if (!value.is_string()) return false;
      out->insert(out->end(), {flag, *value.value<std::string>()});
      return true;
    case KeyType::kStrings: {
      const toml::array* items = value.as_array();
      if (items == nullptr) return false;
      for (const toml::node& item : *items)
        if (!item.is_string()) return false;
      for (const toml::node& item : *items)
        out->insert(out->end(), {flag, *item.value<std::string>()});
      return true;
    }
  }
  return false;
}

// Whether `args` give the flag (--name VALUE or --name=VALUE).
bool Given(const std::vector<std::string>& args, const std::string& flag) {
  for (const std::string& a : args)
    if (a == flag || a.rfind(flag + "=", 0) == 0) return true;
  return false;
}

}  // namespace

absl::StatusOr<std::vector<std::string>> ArgsWithConfigFile(
    const CLI::App& app, const std::vector<std::string>& args) {
  std::string path;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--config" && i + 1 < args.size()) path = args[i + 1];
    if (args[i].rfind("--config=", 0) == 0) path = args[i].substr(9);
  }
  if (path.empty()) return args;
  const std::string what = "--config " + path + ": ";
  toml::table root;
  try {
    root = toml::parse_file(path);
  } catch (const toml::parse_error& e) {
    const auto& at = e.source().begin;
    return absl::InvalidArgumentError(
        what + (at.line > 0 ? "line " + std::to_string(at.line) + ", column " +
                                  std::to_string(at.column) + ": "
                            : "") +
        std::string(e.description()));
  }
  const std::vector<const CLI::Option*> options = ConfigurableOptions(app);
  std::vector<std::string> keys;
  for (const CLI::Option* o : options) keys.push_back(o->get_lnames().front());
  std::vector<std::string> out;
  for (const auto& [key_view, value] : root) {
    std::string key(key_view.str());
    for (char& c : key)
      if (c == '_') c = '-';
    const CLI::Option* option = nullptr;
    for (const CLI::Option* o : options)
      if (o->get_lnames().front() == key) option = o;
    if (option == nullptr) {
      const std::string near = spec::NearestWord(key, keys);
      return absl::InvalidArgumentError(
          what + "'" + std::string(key_view.str()) + "' is no flag of trellis-controller" +
          (near.empty() ? "" : " (did you mean " + near + "?)") +
          "; the keys are the flags' long names, docs/controller-config.md lists them");
    }
    const std::string flag = "--" + key;
    if (Given(args, flag)) continue;  // the command line wins
    const KeyType type = TypeOf(option);
    if (!FlagsOf(flag, type, value, &out))
      return absl::InvalidArgumentError(what + key + " takes " +
                                        (type == KeyType::kInteger ? "an " : "a ") +
                                        TypeName(type) +
                                        (value.is_table() ? ", not a table" : ""));
  }
  out.insert(out.end(), args.begin(), args.end());
  return out;
}

std::string ConfigReference(const CLI::App& app) {
  // Defaults that depend on the environment (common/auth.h), as the rule.
  static const std::pair<const char*, const char*> kByEnvironment[] = {
      {"socket", "$XDG_RUNTIME_DIR/trellis/controller.sock, else ~/.trellis/controller.sock"},
      {"token-file", "$XDG_CONFIG_HOME/trellis/token, else ~/.config/trellis/token"},
  };
  std::string out = "| key | type | default | what it sets |\n|---|---|---|---|\n";
  for (const CLI::Option* o : ConfigurableOptions(app)) {
    const std::string& key = o->get_lnames().front();
    std::string fallback = o->get_default_str();
    for (const auto& [name, rule] : kByEnvironment)
      if (key == name) fallback = rule;
    if (TypeOf(o) == KeyType::kBoolean) fallback = fallback == "true" ? "true" : "false";
    std::string help = o->get_description();
    for (char& c : help)
      if (c == '|') c = '/';
    out += "| `" + key + "` | " + TypeName(TypeOf(o)) + " | " +
           (fallback.empty() ? (o->get_required() ? "(required)" : "-") : "`" + fallback + "`") +
           " | " + help + " |\n";
  }
  return out;
}

}  // namespace trellis::controller

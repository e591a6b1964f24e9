#include "cli/completion.h"

#include <map>
#include <vector>

namespace trellis::cli {

namespace {

// The flags of `cmd` ("--json -f ..."), help included.
std::string Flags(const CLI::App& cmd) {
  std::string out;
  for (const CLI::Option* o : cmd.get_options()) {
    for (const std::string& l : o->get_lnames()) out += (out.empty() ? "--" : " --") + l;
    for (const std::string& s : o->get_snames()) out += (out.empty() ? "-" : " -") + s;
  }
  return out;
}

// What a verb's operands name, from their names in its definition.
std::string OperandKind(const CLI::App& cmd) {
  for (const CLI::Option* o : cmd.get_options()) {
    if (!o->get_positional()) continue;
    const std::string name = o->get_name(true, false);
    if (name == "ID" || name == "RUN") return "run";
    if (name == "NODE") return "node";
    if (name == "FILE") return "file";
  }
  return "";
}

}  // namespace

std::string BashCompletion(const CLI::App& app) {
  std::vector<const CLI::App*> verbs = app.get_subcommands({});
  std::string names;
  for (const CLI::App* v : verbs) names += (names.empty() ? "" : " ") + v->get_name();
  std::string flags_case, operand_case;
  std::map<std::string, std::string> by_kind;
  for (const CLI::App* v : verbs) {
    flags_case += "      " + v->get_name() + ") opts=\"" + Flags(*v) + "\" ;;\n";
    const std::string kind = OperandKind(*v);
    if (!kind.empty()) by_kind[kind] += (by_kind[kind].empty() ? "" : "|") + v->get_name();
  }
  for (const auto& [kind, verbs_of_kind] : by_kind) {
    std::string words;
    if (kind == "run")
      words = "COMPREPLY=($(compgen -W \"$(trellis ls --json 2>/dev/null | "
              "grep -o '\"run_id\": *\"[^\"]*\"' | sed 's/.*\"\\([^\"]*\\)\"$/\\1/')\" -- \"$cur\"))";
    else if (kind == "node")
      words = "COMPREPLY=($(compgen -W \"$( (sinfo -h -N -o %N 2>/dev/null || trellis nodes --json "
              "2>/dev/null | grep -o '\"name\": *\"[^\"]*\"' | sed 's/.*\"\\([^\"]*\\)\"$/\\1/') | "
              "sort -u)\" -- \"$cur\"))";
    else
      words = "COMPREPLY=($(compgen -f -- \"$cur\"))";
    operand_case += "    " + verbs_of_kind + ") " + words + " ;;\n";
  }
  return "# bash completion for trellis, written by `trellis completion bash`.\n"
         "# Load it with: source <(trellis completion bash)\n"
         "_trellis() {\n"
         "  local cur=\"${COMP_WORDS[COMP_CWORD]}\" opts\n"
         "  if [ \"$COMP_CWORD\" -eq 1 ]; then\n"
         "    COMPREPLY=($(compgen -W \"" + names + " " + Flags(app) + "\" -- \"$cur\"))\n"
         "    return\n"
         "  fi\n"
         "  local verb=\"${COMP_WORDS[1]}\"\n"
         "  if [[ \"$cur\" == -* ]]; then\n"
         "    case \"$verb\" in\n" + flags_case +
         "      *) opts=\"\" ;;\n"
         "    esac\n"
         "    COMPREPLY=($(compgen -W \"$opts " + Flags(app) + "\" -- \"$cur\"))\n"
         "    return\n"
         "  fi\n"
         "  case \"$verb\" in\n" + operand_case +
         "    *) COMPREPLY=() ;;\n"
         "  esac\n"
         "}\n"
         "complete -F _trellis trellis\n";
}

std::string ZshCompletion(const CLI::App& app) {
  return "# zsh completion for trellis, written by `trellis completion zsh`.\n"
         "# Load it with: source <(trellis completion zsh)\n"
         "autoload -U +X bashcompinit && bashcompinit\n" +
         BashCompletion(app);
}

}  // namespace trellis::cli

#pragma once
// Helpers of the report tests: a strict enough check that markup nests, and
// the pieces of a chart a test counts.

#include <regex>
#include <set>
#include <string>
#include <vector>

namespace trellis::cli::report::test_util {

// Every element closed in order, attributes quoted, no stray '<' or '>' in
// text (escaping). Empty on success, else what is wrong and where.
inline std::string NestingProblem(const std::string& html) {
  static const std::set<std::string> kVoid = {"meta", "br",    "hr",      "img",
                                              "link", "input", "!DOCTYPE"};
  std::vector<std::string> open;
  size_t i = 0;
  while (i < html.size()) {
    if (html[i] == '>') return "stray '>' at " + std::to_string(i);
    if (html[i] != '<') {
      ++i;
      continue;
    }
    size_t end = i + 1;
    char quote = 0;
    for (; end < html.size(); ++end) {
      char c = html[end];
      if (quote != 0) {
        if (c == quote) quote = 0;
        if (c == '<') return "'<' inside an attribute at " + std::to_string(end);
      } else if (c == '"' || c == '\'') {
        quote = c;
      } else if (c == '<') {
        return "stray '<' at " + std::to_string(i);
      } else if (c == '>') {
        break;
      }
    }
    if (end >= html.size()) return "unclosed tag at " + std::to_string(i);
    std::string tag = html.substr(i + 1, end - i - 1);
    bool closing = !tag.empty() && tag[0] == '/';
    bool self_closing = !tag.empty() && tag.back() == '/';
    std::string name = tag.substr(closing ? 1 : 0);
    name = name.substr(0, name.find_first_of(" \n/"));
    if (closing) {
      if (open.empty() || open.back() != name)
        return "</" + name + "> at " + std::to_string(i) + " closes " +
               (open.empty() ? std::string("nothing") : "<" + open.back() + ">");
      open.pop_back();
    } else if (!self_closing && kVoid.count(name) == 0) {
      open.push_back(name);
      // Style text is CSS, not markup.
      if (name == "style") {
        size_t close = html.find("</style>", end);
        if (close == std::string::npos) return "unclosed <style>";
        end = close - 1;
      }
    }
    i = end + 1;
  }
  if (!open.empty()) return "<" + open.back() + "> never closed";
  return "";
}

inline size_t Count(const std::string& haystack, const std::string& needle) {
  size_t n = 0;
  for (size_t at = haystack.find(needle); at != std::string::npos;
       at = haystack.find(needle, at + needle.size()))
    ++n;
  return n;
}

// The d="..." of the first <path> whose class has `css_class`; "" when none.
inline std::string PathData(const std::string& html, const std::string& css_class) {
  std::smatch m;
  std::regex re("<path class=\"series " + css_class + "\"[^>]* d=\"([^\"]*)\"");
  return std::regex_search(html, m, re) ? m[1].str() : "";
}

// Points of a path: its M and L commands.
inline size_t PathPoints(const std::string& d) { return Count(d, "M") + Count(d, "L"); }

}  // namespace trellis::cli::report::test_util

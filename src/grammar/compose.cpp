#include "grammar/compose.h"

#include "grammar/gbnf_parser.h"

namespace lite_llama::grammar {

namespace {

bool is_word(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

// Skips a quoted literal or class starting at s[i] (its opening char), escapes included.
size_t skip_quoted(std::string_view s, size_t i, char close) {
  for (++i; i < s.size() && s[i] != close; ++i)
    if (s[i] == '\\') ++i;
  return i < s.size() ? i + 1 : s.size();
}

}  // namespace

std::string rename_rule(std::string_view s, const std::string& from, const std::string& to) {
  std::string out;
  for (size_t i = 0; i < s.size();) {
    const char c = s[i];
    if (c == '"' || c == '[') {
      const size_t end = skip_quoted(s, i, c == '"' ? '"' : ']');
      out += s.substr(i, end - i);
      i = end;
    } else if (c == '#') {
      const size_t end = std::min(s.find('\n', i), s.size());
      out += s.substr(i, end - i);
      i = end;
    } else if (is_word(c)) {
      size_t end = i;
      while (end < s.size() && is_word(s[end])) ++end;
      const std::string_view w = s.substr(i, end - i);
      out += w == from ? std::string_view(to) : w;
      i = end;
    } else {
      out += c;
      ++i;
    }
  }
  return out;
}

std::string after_think(std::string_view answer_gbnf, bool in_think) {
  // think-k: k characters of "</think>" matched; the 8th would close the block, so it is never
  // part of the body.
  const std::string close = "</think>";
  std::string g = in_think ? "root ::= think-body \"</think>\" [ \\t\\n]{0,4} think-answer\n"
                           : "root ::= (\"<think>\" think-body \"</think>\" [ \\t\\n]{0,4})? think-answer\n";
  g += "think-body ::= think-0\n";
  for (size_t k = 0; k < close.size(); ++k) {
    const char want = close[k];
    std::string alts = "\"\"";
    if (k + 1 < close.size()) alts += " | \"" + gbnf_escape(std::string(1, want)) + "\" think-" + std::to_string(k + 1);
    if (want != '<') alts += " | \"<\" think-1";
    std::string cls = "[^<";
    if (want != '<') cls += want;
    alts += " | " + cls + "] think-0";
    g += "think-" + std::to_string(k) + " ::= " + alts + "\n";
  }
  return g + rename_rule(answer_gbnf, "root", "think-answer");
}

}  // namespace lite_llama::grammar

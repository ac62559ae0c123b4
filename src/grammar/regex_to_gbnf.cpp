#include "grammar/regex_to_gbnf.h"

#include <cstdio>

#include "core/error.h"
#include "grammar/gbnf_parser.h"

namespace lite_llama::grammar {

namespace {

constexpr int kMaxDepth = 100;

std::string code_escape(uint32_t c) {
  char buf[16];
  if (c < 0x80 && c >= 0x20 && c != '\\' && c != ']' && c != '[' && c != '-' && c != '^' && c != '"')
    return std::string(1, char(c));
  std::snprintf(buf, sizeof buf, c <= 0xFF ? "\\x%02X" : c <= 0xFFFF ? "\\u%04X" : "\\U%08X", c);
  return buf;
}

std::vector<CodeRange> json_safe(std::vector<CodeRange> r) {
  // Drop controls, '"' and '\': a JSON string body never holds them raw.
  std::vector<CodeRange> out;
  for (auto c : normalize_ranges(std::move(r), false)) {
    std::vector<CodeRange> parts{c};
    for (CodeRange cut : {CodeRange{0, 0x1F}, CodeRange{'"', '"'}, CodeRange{'\\', '\\'}}) {
      std::vector<CodeRange> next;
      for (auto p : parts) {
        if (p.hi < cut.lo || p.lo > cut.hi) {
          next.push_back(p);
          continue;
        }
        if (p.lo < cut.lo) next.push_back({p.lo, cut.lo - 1});
        if (p.hi > cut.hi) next.push_back({cut.hi + 1, p.hi});
      }
      parts = next;
    }
    out.insert(out.end(), parts.begin(), parts.end());
  }
  return out;
}

class RegexParser {
 public:
  RegexParser(std::string_view s, const RegexOptions& o) : s_(s), opt_(o) {}

  std::string parse() {
    bool head = false, tail = false;
    if (!s_.empty() && s_[0] == '^') {
      head = true;
      ++i_;
    }
    std::string body = alternatives(0);
    if (i_ < s_.size()) error(s_[i_] == ')' ? "unbalanced ')'" : "unexpected character");
    if (anchored_end_) tail = true;
    std::string any = opt_.json_string ? "json-char*" : "[^\\x0A]*";
    if (!opt_.search) return "(" + body + ")";
    return std::string(head ? "" : any + " ") + "(" + body + ")" + (tail ? "" : " " + any);
  }

 private:
  [[noreturn]] void error(const std::string& msg) const {
    fail("regex: {} at offset {} in /{}/", msg, i_, std::string(s_.substr(0, 200)));
  }
  bool eof() const { return i_ >= s_.size(); }

  std::string alternatives(int depth) {
    if (depth > kMaxDepth) error("groups nested too deeply");
    std::string out = sequence(depth);
    while (!eof() && s_[i_] == '|') {
      ++i_;
      out += " | " + sequence(depth);
    }
    return out;
  }

  std::string sequence(int depth) {
    std::string out;
    while (!eof() && s_[i_] != '|' && s_[i_] != ')') {
      if (s_[i_] == '$') {
        ++i_;
        if (!eof() && s_[i_] != '|' && s_[i_] != ')') error("'$' is supported only at the end");
        if (depth > 0 || !eof()) error("'$' is supported only at the end");
        anchored_end_ = true;
        break;
      }
      std::string atom_text = atom(depth);
      if (!out.empty()) out += ' ';
      out += quantified(std::move(atom_text));
    }
    return out.empty() ? "\"\"" : out;
  }

  std::string quantified(std::string a) {
    if (eof()) return a;
    const char c = s_[i_];
    std::string q;
    if (c == '*' || c == '+' || c == '?') {
      q = std::string(1, c);
      ++i_;
    } else if (c == '{' && i_ + 1 < s_.size() && s_[i_ + 1] >= '0' && s_[i_ + 1] <= '9') {
      const size_t close = s_.find('}', i_);
      if (close == std::string_view::npos) error("unterminated '{'");
      q = std::string(s_.substr(i_, close - i_ + 1));
      for (char d : q.substr(1, q.size() - 2))
        if (!(d >= '0' && d <= '9') && d != ',') error("bad repetition bounds");
      i_ = close + 1;
    } else {
      return a;
    }
    if (!eof() && s_[i_] == '?') ++i_;  // lazy: the same language
    if (!eof() && s_[i_] == '+') error("possessive quantifiers are not supported");
    if (!eof() && (s_[i_] == '*' || s_[i_] == '+' || s_[i_] == '?' || s_[i_] == '{'))
      error("nothing to repeat");
    return "(" + a + ")" + q;
  }

  std::string atom(int depth) {
    const char c = s_[i_];
    if (c == '(') {
      ++i_;
      if (!eof() && s_[i_] == '?') {
        if (i_ + 1 < s_.size() && s_[i_ + 1] == ':') {
          i_ += 2;
        } else if (i_ + 1 < s_.size() && s_[i_ + 1] == 'P' ) {
          error("named groups are not supported");
        } else {
          error("lookaround and inline flags are not supported");
        }
      }
      std::string inner = alternatives(depth + 1);
      if (eof() || s_[i_] != ')') error("missing ')'");
      ++i_;
      return "(" + inner + ")";
    }
    if (c == '*' || c == '+' || c == '?' || c == '{') error("nothing to repeat");
    if (c == '^') error("'^' is supported only at the start");
    if (c == '[') return cls(char_class());
    if (c == '.') {
      ++i_;
      return cls(normalize_ranges({{'\n', '\n'}}, true));
    }
    if (c == '\\') {
      ++i_;
      if (eof()) error("trailing backslash");
      std::vector<CodeRange> r;
      if (class_escape(r)) return cls(r);
      return literal(escape());
    }
    size_t k = 0;
    const std::string rest(s_.substr(i_, 4));
    const uint32_t cp = decode_utf8(rest, k);
    i_ += k;
    return literal(cp);
  }

  std::string literal(uint32_t cp) {
    std::string raw;
    if (opt_.json_string && (cp < 0x20 || cp == '"' || cp == '\\')) {
      char buf[8];
      if (cp == '"' || cp == '\\') {
        raw = std::string("\\") + char(cp);
      } else {
        std::snprintf(buf, sizeof buf, "\\u%04x", cp);
        raw = buf;
      }
    } else {
      append_utf8(raw, cp);
    }
    std::string out(1, '"');
    out.append(gbnf_escape(raw)).push_back('"');
    return out;
  }

  std::string cls(std::vector<CodeRange> r) {
    if (opt_.json_string) r = json_safe(std::move(r));
    if (r.empty()) error("character class matches nothing");
    return gbnf_class(r);
  }

  // \d \w \s and their negations.
  bool class_escape(std::vector<CodeRange>& r) {
    const char c = s_[i_];
    std::vector<CodeRange> base;
    switch (c) {
      case 'd': case 'D': base = {{'0', '9'}}; break;
      case 'w': case 'W': base = {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}}; break;
      case 's': case 'S': base = {{'\t', '\r'}, {' ', ' '}}; break;
      default: return false;
    }
    ++i_;
    const bool neg = c == 'D' || c == 'W' || c == 'S';
    auto n = normalize_ranges(base, neg);
    r.insert(r.end(), n.begin(), n.end());
    return true;
  }

  uint32_t hex(int digits) {
    uint32_t v = 0;
    for (int k = 0; k < digits; ++k) {
      if (eof()) error("truncated escape");
      const char h = s_[i_++];
      const int d = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10
                  : h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
      if (d < 0) error("bad hex digit");
      v = v * 16 + uint32_t(d);
    }
    return v;
  }

  // The code point of an escape (after the backslash).
  uint32_t escape() {
    const char c = s_[i_++];
    switch (c) {
      case 'n': return '\n';
      case 't': return '\t';
      case 'r': return '\r';
      case 'f': return '\f';
      case 'v': return '\v';
      case '0': return 0;
      case 'x': return hex(2);
      case 'u': return hex(4);
      default: break;
    }
    if ((c >= '1' && c <= '9')) error("backreferences are not supported");
    if (c == 'b' || c == 'B' || c == 'A' || c == 'z' || c == 'Z')
      error(std::string("the assertion '\\") + c + "' is not supported");
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))
      error(std::string("unknown escape '\\") + c + "'");
    return uint32_t(uint8_t(c));
  }

  std::vector<CodeRange> char_class() {
    ++i_;  // '['
    bool neg = false;
    if (!eof() && s_[i_] == '^') {
      neg = true;
      ++i_;
    }
    std::vector<CodeRange> r;
    bool first = true;
    while (!eof() && (s_[i_] != ']' || first)) {
      first = false;
      if (s_[i_] == '[' && i_ + 1 < s_.size() && s_[i_ + 1] == ':')
        error("POSIX classes are not supported");
      uint32_t lo;
      if (s_[i_] == '\\') {
        ++i_;
        if (eof()) error("trailing backslash");
        if (class_escape(r)) continue;
        lo = escape();
      } else {
        size_t k = 0;
        const std::string rest(s_.substr(i_, 4));
        lo = decode_utf8(rest, k);
        i_ += k;
      }
      uint32_t hi = lo;
      if (i_ + 1 < s_.size() && s_[i_] == '-' && s_[i_ + 1] != ']') {
        ++i_;
        if (s_[i_] == '\\') {
          ++i_;
          if (eof()) error("trailing backslash");
          hi = escape();
        } else {
          size_t k = 0;
          const std::string rest(s_.substr(i_, 4));
          hi = decode_utf8(rest, k);
          i_ += k;
        }
        if (hi < lo) error("character range is reversed");
      }
      r.push_back({lo, hi});
    }
    if (eof()) error("unterminated character class");
    ++i_;
    return normalize_ranges(std::move(r), neg);
  }

  std::string_view s_;
  RegexOptions opt_;
  size_t i_ = 0;
  bool anchored_end_ = false;
};

}  // namespace

std::string gbnf_class(const std::vector<CodeRange>& ranges) {
  std::string out = "[";
  for (const auto& r : ranges) {
    out += code_escape(r.lo);
    if (r.hi != r.lo) out.append("-").append(code_escape(r.hi));
  }
  return out + "]";
}

std::string regex_to_gbnf(std::string_view re, const RegexOptions& opt) {
  return RegexParser(re, opt).parse();
}

std::string regex_grammar(std::string_view re) { return "root ::= " + regex_to_gbnf(re) + "\n"; }

}  // namespace lite_llama::grammar

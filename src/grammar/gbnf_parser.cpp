#include "grammar/gbnf_parser.h"

#include <cstdio>

#include "core/error.h"

namespace lite_llama::grammar {

namespace {

constexpr int kMaxDepth = 200;  // nesting of parentheses: deeper input is refused, not recursed

bool is_word(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '_';
}

class Parser {
 public:
  explicit Parser(std::string_view s) : s_(s) {}

  std::vector<RuleDef> parse() {
    std::vector<RuleDef> rules;
    space(true);
    while (!eof()) {
      const std::string name = word();
      if (name.empty()) error("expected a rule name");
      space(false);
      if (s_.substr(i_, 3) != "::=") error("expected '::=' after rule name '" + name + "'");
      i_ += 3;
      space(true);
      RuleDef d{name, alternatives(0)};
      // A rule ends at a newline (or where the next one starts, after a trailing '|').
      if (!eof() && s_[i_] != '\n' && s_[i_] != '\r' && !(is_word(s_[i_]) && rule_start_ahead()))
        error("unexpected character");
      space(true);
      rules.push_back(std::move(d));
    }
    if (rules.empty()) error("the grammar has no rules");
    return rules;
  }

 private:
  bool eof() const { return i_ >= s_.size(); }
  [[noreturn]] void error(const std::string& msg) const {
    size_t line = 1, col = 1;
    for (size_t k = 0; k < i_ && k < s_.size(); ++k) {
      if (s_[k] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    fail("grammar: line {} col {}: {}", line, col, msg);
  }

  // Skips blanks and comments; newlines only where `newlines` (inside groups, after '|').
  void space(bool newlines) {
    while (!eof()) {
      const char c = s_[i_];
      if (c == ' ' || c == '\t' || ((c == '\n' || c == '\r') && newlines)) {
        ++i_;
      } else if (c == '#') {
        while (!eof() && s_[i_] != '\n') ++i_;
      } else {
        break;
      }
    }
  }

  std::string word() {
    const size_t b = i_;
    while (!eof() && is_word(s_[i_])) ++i_;
    return std::string(s_.substr(b, i_ - b));
  }

  // After a word: a new rule starts when '::=' follows (so the sequence ends before it).
  bool rule_start_ahead() const {
    size_t k = i_;
    while (k < s_.size() && is_word(s_[k])) ++k;
    while (k < s_.size() && (s_[k] == ' ' || s_[k] == '\t')) ++k;
    return s_.substr(k, 3) == "::=";
  }

  ExprPtr alternatives(int depth) {
    if (depth > kMaxDepth) error("groups nested deeper than " + std::to_string(kMaxDepth));
    auto alt = Expr::alt();
    alt->items.push_back(sequence(depth));
    while (!eof() && s_[i_] == '|') {
      ++i_;
      space(true);
      alt->items.push_back(sequence(depth));
    }
    if (alt->items.size() == 1) return std::move(alt->items[0]);
    return alt;
  }

  ExprPtr sequence(int depth) {
    auto seq = Expr::seq();
    const bool nested = depth > 0;
    while (!eof()) {
      const char c = s_[i_];
      ExprPtr item;
      if (c == '"') {
        ++i_;
        item = Expr::seq();
        while (!eof() && s_[i_] != '"') {
          const uint32_t cp = character();
          item->items.push_back(Expr::chars({{cp, cp}}));
        }
        if (eof()) error("unterminated string literal");
        ++i_;
      } else if (c == '[') {
        item = char_class();
      } else if (c == '.') {
        ++i_;
        item = Expr::chars(normalize_ranges({{'\n', '\n'}}, true));
      } else if (c == '(') {
        ++i_;
        space(true);
        item = alternatives(depth + 1);
        space(true);
        if (eof() || s_[i_] != ')') error("expected ')'");
        ++i_;
      } else if (is_word(c)) {
        if (!nested && rule_start_ahead()) break;
        item = Expr::ref(word());
      } else {
        break;
      }
      item = postfix(std::move(item));
      seq->items.push_back(std::move(item));
      space(nested);
    }
    return seq;
  }

  ExprPtr postfix(ExprPtr item) {
    space(false);
    while (!eof()) {
      const char c = s_[i_];
      if (c == '*') {
        item = Expr::repeat(std::move(item), 0, -1);
      } else if (c == '+') {
        item = Expr::repeat(std::move(item), 1, -1);
      } else if (c == '?') {
        item = Expr::repeat(std::move(item), 0, 1);
      } else if (c == '{') {
        ++i_;
        space(false);
        const int lo = number();
        int hi = lo;
        space(false);
        if (!eof() && s_[i_] == ',') {
          ++i_;
          space(false);
          hi = (!eof() && s_[i_] == '}') ? -1 : number();
          space(false);
        }
        if (eof() || s_[i_] != '}') error("expected '}' after repetition bounds");
        if (hi >= 0 && hi < lo) error("repetition bounds are reversed");
        item = Expr::repeat(std::move(item), lo, hi);
      } else {
        break;
      }
      ++i_;
      space(false);
    }
    return item;
  }

  int number() {
    const size_t b = i_;
    long v = 0;
    while (!eof() && s_[i_] >= '0' && s_[i_] <= '9' && v < 1000000) v = v * 10 + (s_[i_++] - '0');
    if (i_ == b) error("expected a number in repetition bounds");
    if (v > 100000) error("repetition bound too large");
    return int(v);
  }

  ExprPtr char_class() {
    ++i_;  // '['
    bool negate = false;
    if (!eof() && s_[i_] == '^') {
      negate = true;
      ++i_;
    }
    std::vector<CodeRange> ranges;
    while (!eof() && s_[i_] != ']') {
      const uint32_t lo = character();
      uint32_t hi = lo;
      if (i_ + 1 < s_.size() && s_[i_] == '-' && s_[i_ + 1] != ']') {
        ++i_;
        hi = character();
        if (hi < lo) error("character range is reversed");
      }
      ranges.push_back({lo, hi});
    }
    if (eof()) error("unterminated character class");
    ++i_;
    ranges = normalize_ranges(std::move(ranges), negate);
    if (ranges.empty()) error("character class matches nothing");
    return Expr::chars(std::move(ranges));
  }

  uint32_t hex(int digits) {
    uint32_t v = 0;
    for (int k = 0; k < digits; ++k) {
      if (eof()) error("truncated escape");
      const char c = s_[i_++];
      const int d = c >= '0' && c <= '9' ? c - '0'
                    : c >= 'a' && c <= 'f' ? c - 'a' + 10
                    : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                           : -1;
      if (d < 0) error("bad hex digit in escape");
      v = v * 16 + uint32_t(d);
    }
    if (v > 0x10FFFF) error("code point out of range");
    return v;
  }

  // One (possibly escaped) code point of a literal or class.
  uint32_t character() {
    if (s_[i_] != '\\') {
      const std::string rest(s_.substr(i_, 4));
      size_t k = 0;
      const uint32_t cp = decode_utf8(rest, k);
      i_ += k;
      return cp;
    }
    ++i_;
    if (eof()) error("truncated escape");
    const char c = s_[i_++];
    switch (c) {
      case 'n': return '\n';
      case 't': return '\t';
      case 'r': return '\r';
      case '\\': case '"': case '[': case ']': case '-': case '^': case '/': return uint32_t(c);
      case 'x': return hex(2);
      case 'u': return hex(4);
      case 'U': return hex(8);
      default: --i_; error(std::string("unknown escape '\\") + c + "'");
    }
  }

  std::string_view s_;
  size_t i_ = 0;
};

}  // namespace

std::vector<RuleDef> parse_gbnf(std::string_view text) { return Parser(text).parse(); }

Grammar compile_gbnf(std::string_view text) { return Grammar::build(parse_gbnf(text)); }

std::string gbnf_escape(std::string_view s) {
  std::string out;
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += char(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7F) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02X", c);
      out += buf;
    } else {
      out += char(c);
    }
  }
  return out;
}

}  // namespace lite_llama::grammar

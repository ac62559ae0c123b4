// Tokenizer for templates: splits text from {{ }}, {% %} and {# #} tags, applies whitespace
// control, and lexes the expression tokens inside tags (names, numbers, strings, operators).
#include "template/jinja_lexer.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>

#include "core/error.h"
#include "template/jinja_value.h"

namespace lite_llama::jinja {

void syntax_error(int line, int col, const std::string& msg) {
  fail("chat template line {} column {}: {}", line, col, msg);
}

namespace {

// jinja2 turns "\r\n" and "\r" into "\n" and drops one trailing line break
// (keep_trailing_newline=False).
std::string normalize_newlines(std::string_view src) {
  std::string out;
  out.reserve(src.size());
  for (size_t k = 0; k < src.size(); ++k) {
    if (src[k] != '\r') {
      out += src[k];
      continue;
    }
    out += '\n';
    if (k + 1 < src.size() && src[k + 1] == '\n') ++k;
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

// Length in bytes of the whitespace code point at s[pos], or 0.
size_t space_len(std::string_view s, size_t pos) {
  unsigned char c = static_cast<unsigned char>(s[pos]);
  if (c < 0x80) return is_unicode_space(c) ? 1 : 0;
  size_t len = (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
  if (pos + len > s.size()) return 0;
  std::u32string cp = utf8_decode(s.substr(pos, len));
  return cp.size() == 1 && is_unicode_space(cp[0]) ? len : 0;
}

std::string rstrip_space(const std::string& s) {
  std::u32string cps = utf8_decode(s);
  while (!cps.empty() && is_unicode_space(cps.back())) cps.pop_back();
  return utf8_encode(cps);
}

// The template text, where its lines start (for error locations) and the tokens emitted so far;
// shared by the Lexer (text and tags) and the scanners of the tokens inside tags below.
class Source {
 public:
  explicit Source(std::string src) : src_(std::move(src)) {
    line_starts_.push_back(0);
    for (size_t k = 0; k < src_.size(); ++k)
      if (src_[k] == '\n') line_starts_.push_back(k + 1);
  }

  const std::string& src() const { return src_; }
  const std::vector<Token>& tokens() const { return toks_; }
  std::vector<Token> take_tokens() { return std::move(toks_); }

  Token& push(TokType t, std::string text, size_t pos) {
    Token tok;
    tok.type = t;
    tok.text = std::move(text);
    locate(pos, tok.line, tok.col);
    toks_.push_back(std::move(tok));
    return toks_.back();
  }

  void locate(size_t pos, int& line, int& col) const {
    auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), pos);
    line = static_cast<int>(it - line_starts_.begin());
    col = static_cast<int>(pos - line_starts_[line - 1]) + 1;
  }

  [[noreturn]] void error_at(size_t pos, const std::string& msg) const {
    int line, col;
    locate(pos, line, col);
    syntax_error(line, col, msg);
  }

 protected:
  std::string src_;

 private:
  std::vector<size_t> line_starts_;
  std::vector<Token> toks_;
};

size_t lex_number(Source& s, size_t pos) {
  const std::string& src = s.src();
  auto digits = [&](size_t k) {
    while (k < src.size() && (std::isdigit(static_cast<unsigned char>(src[k])) ||
                              (src[k] == '_' && k + 1 < src.size() &&
                               std::isdigit(static_cast<unsigned char>(src[k + 1])))))
      ++k;
    return k;
  };
  size_t e = digits(pos);
  const std::vector<Token>& toks = s.tokens();
  bool after_dot = !toks.empty() && toks.back().type == TokType::kOp && toks.back().text == ".";
  bool is_float = false;
  if (!after_dot && e + 1 < src.size() && src[e] == '.' &&
      std::isdigit(static_cast<unsigned char>(src[e + 1]))) {
    e = digits(e + 1);
    is_float = true;
  }
  if (!after_dot && e < src.size() && (src[e] == 'e' || src[e] == 'E')) {
    size_t k = e + 1;
    if (k < src.size() && (src[k] == '+' || src[k] == '-')) ++k;
    if (k < src.size() && std::isdigit(static_cast<unsigned char>(src[k]))) {
      e = digits(k);
      is_float = true;
    }
  }
  std::string text;
  for (size_t k = pos; k < e; ++k)
    if (src[k] != '_') text += src[k];
  Token& tok = s.push(is_float ? TokType::kFloat : TokType::kInt, text, pos);
  if (is_float) {
    tok.fval = std::strtod(text.c_str(), nullptr);
  } else {
    tok.ival = std::strtoll(text.c_str(), nullptr, 10);  // past 64 bits the parser reads the text
  }
  return e;
}

// Python string literal escapes (jinja2 decodes literals with "unicode-escape").
size_t lex_string(Source& s, size_t pos) {
  const std::string& src = s.src();
  char q = src[pos];
  std::string out;
  size_t k = pos + 1;
  while (true) {
    if (k >= src.size()) s.error_at(pos, "unterminated string literal");
    char c = src[k];
    if (c == q) break;
    if (c != '\\') {
      out += c;
      ++k;
      continue;
    }
    if (k + 1 >= src.size()) s.error_at(pos, "unterminated string literal");
    char e = src[k + 1];
    k += 2;
    switch (e) {
      case 'n':
        out += '\n';
        break;
      case 't':
        out += '\t';
        break;
      case 'r':
        out += '\r';
        break;
      case '\\':
        out += '\\';
        break;
      case '\'':
        out += '\'';
        break;
      case '"':
        out += '"';
        break;
      case 'a':
        out += '\a';
        break;
      case 'b':
        out += '\b';
        break;
      case 'f':
        out += '\f';
        break;
      case 'v':
        out += '\v';
        break;
      case '\n':
        break;  // line continuation
      case 'x':
      case 'u':
      case 'U': {
        size_t n = e == 'x' ? 2 : e == 'u' ? 4 : 8;
        if (k + n > src.size()) s.error_at(pos, "truncated \\" + std::string(1, e) + " escape");
        std::string hex = src.substr(k, n);
        if (hex.find_first_not_of("0123456789abcdefABCDEF") != std::string::npos)
          s.error_at(pos, "truncated \\" + std::string(1, e) + " escape");
        utf8_append(out, static_cast<char32_t>(std::strtoul(hex.c_str(), nullptr, 16)));
        k += n;
        break;
      }
      default:
        if (e >= '0' && e <= '7') {
          unsigned v = e - '0';
          for (int m = 0; m < 2 && k < src.size() && src[k] >= '0' && src[k] <= '7'; ++m)
            v = v * 8 + (src[k++] - '0');
          utf8_append(out, v);
        } else if (e == 'N') {
          s.error_at(pos, "unsupported \\N{...} escape in string literal");
        } else {
          out += '\\';  // unknown escapes stay as written, as in Python
          out += e;
        }
    }
  }
  s.push(TokType::kString, out, pos);
  return k + 1;
}

// One token inside a {{ }} or {% %} tag; depth counts open brackets, inside which the closing
// delimiter of the tag is not recognised.
size_t lex_expr_token(Source& s, size_t pos, int& depth) {
  const std::string& src = s.src();
  char c = src[pos];
  if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
    size_t e = pos;
    while (e < src.size() && (std::isalnum(static_cast<unsigned char>(src[e])) || src[e] == '_'))
      ++e;
    s.push(TokType::kName, src.substr(pos, e - pos), pos);
    return e;
  }
  if (std::isdigit(static_cast<unsigned char>(c))) return lex_number(s, pos);
  if (c == '\'' || c == '"') return lex_string(s, pos);
  static const char* kOps2[] = {"//", "**", "==", "!=", ">=", "<="};
  for (const char* op : kOps2) {
    if (src.compare(pos, 2, op) == 0) {
      s.push(TokType::kOp, op, pos);
      return pos + 2;
    }
  }
  if (std::string_view("+-/*%~[](){}><=.:|,;").find(c) == std::string_view::npos)
    s.error_at(pos, std::string("unexpected character '") + c + "'");
  if (c == '(' || c == '[' || c == '{') ++depth;
  if (c == ')' || c == ']' || c == '}') {
    if (depth == 0) s.error_at(pos, std::string("unexpected '") + c + "'");
    --depth;
  }
  s.push(TokType::kOp, std::string(1, c), pos);
  return pos + 1;
}

// Splits text from tags with jinja2's whitespace control; the tokens inside tags come from
// lex_expr_token.
class Lexer : private Source {
 public:
  using Source::Source;

  std::vector<Token> run() {
    size_t pos = 0;
    while (pos < src_.size()) {
      size_t tag = find_tag(pos);
      if (tag == std::string::npos) {
        emit_text(src_.substr(pos), pos);
        break;
      }
      char kind = src_[tag + 1];
      char sign = tag + 2 < src_.size() && (src_[tag + 2] == '-' || src_[tag + 2] == '+')
                      ? src_[tag + 2]
                      : 0;
      std::string text = src_.substr(pos, tag - pos);
      if (sign == '-') {
        text = rstrip_space(text);
      } else if (sign != '+' && kind != '{') {
        text = lstrip_block(text, pos);
      }
      if (kind == '%' && is_raw(tag, sign)) {
        emit_text(text, pos);
        pos = lex_raw(tag);
        continue;
      }
      emit_text(text, pos);
      size_t body = tag + 2 + (sign ? 1 : 0);
      if (kind == '#') {
        pos = skip_comment(tag, body);
      } else {
        pos = lex_tag(tag, body, kind == '{');
      }
    }
    push(TokType::kEof, "", src_.size());
    return take_tokens();
  }

 private:
  size_t find_tag(size_t pos) const {
    for (size_t k = src_.find('{', pos); k != std::string::npos; k = src_.find('{', k + 1)) {
      if (k + 1 < src_.size() && (src_[k + 1] == '{' || src_[k + 1] == '%' || src_[k + 1] == '#'))
        return k;
    }
    return std::string::npos;
  }

  // lstrip_blocks: drop spaces between the start of the line and a block/comment tag.
  std::string lstrip_block(const std::string& text, size_t text_pos) const {
    size_t nl = text.rfind('\n');
    size_t l_pos = nl == std::string::npos ? 0 : nl + 1;
    bool line_starting = text_pos == 0 || src_[text_pos - 1] == '\n';
    if (l_pos == 0 && !line_starting) return text;
    if (l_pos == text.size()) return text;
    for (size_t k = l_pos; k < text.size();) {
      size_t n = space_len(text, k);
      if (n == 0) return text;
      k += n;
    }
    return text.substr(0, l_pos);
  }

  // After a tag: `-` strips all following whitespace; trim_blocks eats one newline after blocks.
  size_t after_tag(size_t pos, char sign, bool is_block) const {
    if (sign == '-') {
      while (pos < src_.size()) {
        size_t n = space_len(src_, pos);
        if (n == 0) break;
        pos += n;
      }
    } else if (sign != '+' && is_block && pos < src_.size() && src_[pos] == '\n') {
      ++pos;
    }
    return pos;
  }

  size_t skip_comment(size_t tag, size_t body) {
    size_t end = src_.find("#}", body);
    if (end == std::string::npos) error_at(tag, "missing end of comment tag '#}'");
    char sign = end > body && (src_[end - 1] == '-' || src_[end - 1] == '+') ? src_[end - 1] : 0;
    return after_tag(end + 2, sign, true);
  }

  bool is_raw(size_t tag, char sign) const {
    size_t k = tag + 2 + (sign ? 1 : 0);
    while (k < src_.size() && space_len(src_, k)) k += space_len(src_, k);
    if (src_.compare(k, 3, "raw") != 0) return false;
    k += 3;
    while (k < src_.size() && space_len(src_, k)) k += space_len(src_, k);
    return src_.compare(k, 2, "%}") == 0 || src_.compare(k, 3, "-%}") == 0;
  }

  size_t lex_raw(size_t tag) {
    size_t close = src_.find("%}", tag);
    char open_sign = src_[close - 1] == '-' ? '-' : 0;
    size_t content = after_tag(close + 2, open_sign, false);
    for (size_t k = src_.find("{%", content); k != std::string::npos; k = src_.find("{%", k + 1)) {
      char sign =
          k + 2 < src_.size() && (src_[k + 2] == '-' || src_[k + 2] == '+') ? src_[k + 2] : 0;
      size_t m = k + 2 + (sign ? 1 : 0);
      while (m < src_.size() && space_len(src_, m)) m += space_len(src_, m);
      if (src_.compare(m, 6, "endraw") != 0) continue;
      m += 6;
      while (m < src_.size() && space_len(src_, m)) m += space_len(src_, m);
      char end_sign = 0;
      if (m < src_.size() && (src_[m] == '-' || src_[m] == '+')) end_sign = src_[m++];
      if (src_.compare(m, 2, "%}") != 0) continue;
      std::string text = src_.substr(content, k - content);
      if (sign == '-') {
        text = rstrip_space(text);
      } else if (sign != '+') {
        text = lstrip_block(text, content);
      }
      emit_text(text, content);
      return after_tag(m + 2, end_sign, true);
    }
    error_at(tag, "missing end of raw directive '{% endraw %}'");
  }

  size_t lex_tag(size_t tag, size_t pos, bool is_var) {
    push(is_var ? TokType::kVarBegin : TokType::kBlockBegin, "", tag);
    int depth = 0;
    while (true) {
      while (pos < src_.size() && space_len(src_, pos)) pos += space_len(src_, pos);
      if (pos >= src_.size()) error_at(tag, is_var ? "unclosed '{{' tag" : "unclosed '{%' tag");
      if (depth == 0) {
        const char* close = is_var ? "}}" : "%}";
        char sign = 0;
        size_t end = std::string::npos;
        if ((src_[pos] == '-' || (!is_var && src_[pos] == '+')) &&
            src_.compare(pos + 1, 2, close) == 0) {
          sign = src_[pos];
          end = pos + 3;
        } else if (src_.compare(pos, 2, close) == 0) {
          end = pos + 2;
        }
        if (end != std::string::npos) {
          push(is_var ? TokType::kVarEnd : TokType::kBlockEnd, "", pos);
          return after_tag(end, sign, !is_var);
        }
      }
      pos = lex_expr_token(*this, pos, depth);
    }
  }

  void emit_text(const std::string& text, size_t pos) {
    if (!text.empty()) push(TokType::kText, text, pos);
  }
};

}  // namespace

std::vector<Token> tokenize(std::string_view source) {
  return Lexer(normalize_newlines(source)).run();
}

}  // namespace lite_llama::jinja
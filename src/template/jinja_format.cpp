// Python's number text: int() / float() parsing for the int and float filters, and
// printf-style formatting: Python's `str % args`, which jinja2's format filter calls. Python
// formats integers itself (a '-' sign before the digits, '#' gives 0x/0o), so only floats go
// through snprintf, whose %e/%f/%g match CPython's.
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "core/error.h"
#include "template/jinja_builtins.h"

namespace lite_llama::jinja {

namespace {

struct Spec {
  bool left = false, plus = false, space = false, zero = false, alt = false;
  size_t width = 0, precision = SIZE_MAX;  // SIZE_MAX: none given
};

Spec parse_spec(std::string_view spec) {
  Spec s;
  size_t k = 0;
  for (; k < spec.size() && std::string_view("-+ #0").find(spec[k]) != std::string_view::npos; ++k) {
    s.left |= spec[k] == '-';
    s.plus |= spec[k] == '+';
    s.space |= spec[k] == ' ';
    s.zero |= spec[k] == '0';
    s.alt |= spec[k] == '#';
  }
  auto number = [&](size_t& n) {
    for (n = 0; k < spec.size() && spec[k] >= '0' && spec[k] <= '9'; ++k)
      if ((n = n * 10 + size_t(spec[k] - '0')) > (size_t{1} << 28)) fail("format: width too big");
  };
  number(s.width);
  if (k < spec.size() && spec[k] == '.') {
    ++k;
    number(s.precision);
  }
  if (k != spec.size()) fail("format: unsupported format character '{}'", spec[k]);
  return s;
}

// Width counts characters, as Python's do.
std::string pad(std::string s, const Spec& sp, size_t chars) {
  if (chars < sp.width) s.insert(sp.left ? s.size() : 0, sp.width - chars, ' ');
  return s;
}

std::string pad_str(const std::string& s, const Spec& sp) {
  std::u32string c = utf8_decode(s);
  if (c.size() > sp.precision) c.resize(sp.precision);
  return pad(utf8_encode(c), sp, c.size());
}

std::string format_int(int64_t n, char conv, const Spec& sp) {
  const unsigned base = conv == 'x' || conv == 'X' ? 16 : conv == 'o' ? 8 : 10;
  std::string digits = int_digits(n, base, conv == 'X');
  if (sp.precision != SIZE_MAX && digits.size() < sp.precision)
    digits.insert(0, sp.precision - digits.size(), '0');
  std::string prefix = n < 0 ? "-" : sp.plus ? "+" : sp.space ? " " : "";
  if (sp.alt && base != 10) prefix += conv == 'o' ? "0o" : conv == 'x' ? "0x" : "0X";
  if (sp.zero && !sp.left && prefix.size() + digits.size() < sp.width)
    digits.insert(0, sp.width - prefix.size() - digits.size(), '0');
  std::string out = prefix + digits;
  return pad(out, sp, out.size());
}

// Python's message names the conversion: "%d format: a real number is required, not str".
int64_t int_operand(const Value& v, char conv) {
  if (v.is_integral()) return v.as_int();
  if (conv == 'd' || conv == 'i' || conv == 'u') {
    if (v.kind == Value::Kind::kFloat) {
      int64_t n = 0;
      if (!float_to_int(v.f, n)) fail("format: %{} of {} is out of range", conv, repr(v));
      return n;
    }
    fail("%{} format: a real number is required, not {}", conv, type_name(v));
  }
  fail("%{} format: an integer is required, not {}", conv, type_name(v));
}

std::string format_one(const Value& arg, char conv, std::string_view spec_text) {
  Spec sp = parse_spec(spec_text);
  switch (conv) {
    case 's':
      return pad_str(to_str(arg), sp);
    case 'r':
      return pad_str(repr(arg), sp);
    case 'd': case 'i': case 'u': case 'x': case 'X': case 'o':
      return format_int(int_operand(arg, conv), conv, sp);
    case 'c': {
      std::string ch;
      if (arg.is_string() && utf8_decode(arg.s).size() == 1) {
        ch = arg.s;
      } else if (arg.is_integral() && arg.as_int() >= 0 && arg.as_int() <= 0x10ffff) {
        utf8_append(ch, static_cast<char32_t>(arg.as_int()));
      } else {
        fail("%c requires an int or a unicode character, not {}", type_name(arg));
      }
      return pad(ch, sp, 1);
    }
    case 'e': case 'E': case 'f': case 'F': case 'g': case 'G': {
      if (!arg.is_number())
        fail("must be real number, not {}", type_name(arg));
      std::string fmt = "%" + std::string(spec_text) + conv;
      int n = std::snprintf(nullptr, 0, fmt.c_str(), arg.as_double());
      std::string out(static_cast<size_t>(n) + 1, '\0');
      std::snprintf(out.data(), out.size(), fmt.c_str(), arg.as_double());
      out.resize(static_cast<size_t>(n));
      return out;
    }
    default:
      fail("unsupported format character '{}'", conv);
  }
}

}  // namespace

// Python's digits of `s` (any script's decimal digits, letters for bases over 10) with the
// underscores it allows between digits dropped; false on a misplaced underscore or no digit.
static bool py_digits(std::u32string_view s, std::string& out) {
  out.clear();
  for (size_t k = 0; k < s.size(); ++k) {
    char32_t c = s[k];
    if (c == '_') {
      if (out.empty() || k + 1 == s.size() || s[k + 1] == '_') return false;
      continue;
    }
    int d = decimal_digit(c);
    if (d >= 0) out += static_cast<char>('0' + d);
    else if (c < 0x80 && std::isalpha(static_cast<int>(c))) out += static_cast<char>(std::tolower(static_cast<int>(c)));
    else return false;
  }
  return !out.empty();
}

std::string int_digits(int64_t n, unsigned base, bool upper) {
  const char* digit_chars = upper ? "0123456789ABCDEF" : "0123456789abcdef";
  uint64_t mag = n < 0 ? 0 - static_cast<uint64_t>(n) : static_cast<uint64_t>(n);
  std::string digits;
  do {
    digits.insert(digits.begin(), digit_chars[mag % base]);
    mag /= base;
  } while (mag);
  return digits;
}

// int(s, base) as Python parses it: sign, base prefixes, underscores. 1: parsed; 0: invalid
// (ValueError); beyond 64 bits fails, as the engine's other integer overflows do.
bool py_parse_int(const std::string& text, int64_t base, int64_t& out) {
  const unsigned __int128 kInt64Limit = static_cast<unsigned __int128>(1) << 63;
  if (base != 0 && (base < 2 || base > 36)) return false;  // ValueError
  std::u32string s = utf8_decode(py_strip(text, Value::none(), true, true));
  std::u32string_view v = s;
  bool neg = false;
  if (!v.empty() && (v[0] == '+' || v[0] == '-')) {
    neg = v[0] == '-';
    v.remove_prefix(1);
  }
  bool prefixed = false;
  if (v.size() >= 2 && v[0] == '0') {
    char32_t p = v[1] | 0x20;
    int64_t pb = p == 'x' ? 16 : p == 'o' ? 8 : p == 'b' ? 2 : 0;
    if (pb && (base == 0 || base == pb)) {
      base = pb;
      prefixed = true;
      v.remove_prefix(2);
      if (!v.empty() && v[0] == '_') v.remove_prefix(1);  // 0x_1f is valid
    }
  }
  std::string digits;
  if (!py_digits(v, digits)) return false;
  if (base == 0) {
    base = 10;  // without a prefix: decimal, and no leading zero unless all zeros
    if (!prefixed && digits[0] == '0' && digits.find_first_not_of('0') != std::string::npos)
      return false;
  }
  unsigned __int128 x = 0;
  for (char c : digits) {
    int d = c <= '9' ? c - '0' : c - 'a' + 10;
    if (d >= base) return false;
    if ((x = x * static_cast<unsigned>(base) + static_cast<unsigned>(d)) > kInt64Limit)
      fail("int: {} is beyond 64 bits (not supported)", text);
  }
  if (!neg && x == kInt64Limit) fail("int: {} is beyond 64 bits (not supported)", text);
  out = neg ? static_cast<int64_t>(0 - static_cast<uint64_t>(x)) : static_cast<int64_t>(x);
  return true;
}

// float(s) as Python parses it: decimal digits with underscores, exponent, inf/infinity/nan;
// no hex floats (which strtod would read).
bool py_parse_float(const std::string& text, double& out) {
  std::u32string s = utf8_decode(py_strip(text, Value::none(), true, true));
  std::string ascii, lowered;
  for (char32_t c : s) {
    int d = decimal_digit(c);
    if (d >= 0) c = static_cast<char32_t>('0' + d);
    if (c >= 0x80) return false;
    ascii += static_cast<char>(c);
    lowered += static_cast<char>(std::tolower(static_cast<int>(c)));
  }
  std::string_view body = lowered;
  if (!body.empty() && (body[0] == '+' || body[0] == '-')) body.remove_prefix(1);
  if (body == "inf" || body == "infinity" || body == "nan") {
    out = std::strtod(ascii.c_str(), nullptr);
    return true;
  }
  // [digits][.digits][e[sign]digits], underscores only between digits.
  std::string clean;
  size_t k = 0, mantissa_digits = 0;
  auto digit_run = [&](size_t& count) {
    size_t start = k;
    while (k < body.size() && (std::isdigit(static_cast<unsigned char>(body[k])) ||
                               (body[k] == '_' && k > start && k + 1 < body.size() &&
                                std::isdigit(static_cast<unsigned char>(body[k + 1]))))) {
      if (body[k] != '_') {
        clean += body[k];
        ++count;
      }
      ++k;
    }
  };
  digit_run(mantissa_digits);
  if (k < body.size() && body[k] == '.') {
    clean += body[k++];
    digit_run(mantissa_digits);
  }
  if (mantissa_digits == 0) return false;
  if (k < body.size() && body[k] == 'e') {
    clean += body[k++];
    if (k < body.size() && (body[k] == '+' || body[k] == '-')) clean += body[k++];
    size_t exp_digits = 0;
    digit_run(exp_digits);
    if (exp_digits == 0) return false;
  }
  if (k != body.size()) return false;
  out = std::strtod(clean.c_str(), nullptr);
  if (lowered[0] == '-') out = -out;
  return true;
}

Value printf_format(const Value& v, CallArgs& a) {
  std::string f = to_str(v), out;
  size_t next = 0;
  for (size_t k = 0; k < f.size(); ++k) {
    if (f[k] != '%') {
      out += f[k];
      continue;
    }
    size_t e = k + 1;
    std::string key;
    if (e < f.size() && f[e] == '(') {
      size_t close = f.find(')', e);
      if (close == std::string::npos) fail("format: incomplete format key");
      key = f.substr(e + 1, close - e - 1);
      e = close + 1;
    }
    size_t spec_start = e;
    while (e < f.size() && std::string_view("0123456789.-+ #").find(f[e]) != std::string_view::npos)
      ++e;
    if (e >= f.size()) fail("format: incomplete format");
    char conv = f[e];
    if (conv == '%') {
      out += '%';
      k = e;
      continue;
    }
    const Value* arg =
        key.empty() ? (next < a.pos.size() ? &a.pos[next++] : nullptr) : find_arg(a, SIZE_MAX, key);
    if (!arg) fail("format: not enough arguments for format string");
    out += format_one(*arg, conv, std::string_view(f).substr(spec_start, e - spec_start));
    k = e;
  }
  if (next < a.pos.size() && a.kw.empty())
    fail("not all arguments converted during string formatting");
  return Value::string(out);
}

}  // namespace lite_llama::jinja

// Python's str.format as jinja2's sandbox runs it: automatic/positional/keyword fields, field
// paths ({0.role}, {0[1]}) looked up through the sandbox's getattr/getitem, conversions (!r !s
// !a), nested fields in the spec, and the format-spec mini-language of str, int and float.
#include <cmath>
#include <cstdio>

#include "core/error.h"
#include "template/jinja_builtins.h"

namespace lite_llama::jinja {

namespace {

struct FormatSpec {
  char32_t fill = ' ';
  char align = 0;  // 0: the type's default
  char sign = 0;   // 0, '+', '-', ' '
  bool z = false, alt = false;
  size_t width = 0;
  char grouping = 0;          // 0, ',', '_'
  size_t precision = SIZE_MAX;  // SIZE_MAX: none given
  char type = 0;
};

bool is_align(char32_t c) { return c == '<' || c == '>' || c == '=' || c == '^'; }

size_t read_number(const std::u32string& s, size_t& k) {
  size_t n = 0;
  for (; k < s.size() && s[k] >= '0' && s[k] <= '9'; ++k)
    if ((n = n * 10 + (s[k] - '0')) > (size_t{1} << 24)) fail("str.format: width or precision too big");
  return n;
}

// [[fill]align][sign][z][#][0][width][grouping][.precision][type]; default_align is '<' for
// strings and '>' for numbers (it decides what the '0' flag means).
FormatSpec parse_spec(const std::string& text, char default_align, const char* type_name) {
  std::u32string s = utf8_decode(text);
  FormatSpec f;
  size_t k = 0;
  bool fill_given = false;
  if (s.size() >= 2 && is_align(s[1])) {
    f.fill = s[0], f.align = char(s[1]), k = 2, fill_given = true;
  } else if (!s.empty() && is_align(s[0])) {
    f.align = char(s[0]), k = 1;
  }
  if (k < s.size() && (s[k] == '+' || s[k] == '-' || s[k] == ' ')) f.sign = char(s[k++]);
  if (k < s.size() && s[k] == 'z') f.z = true, ++k;
  if (k < s.size() && s[k] == '#') f.alt = true, ++k;
  if (k < s.size() && s[k] == '0') {
    if (!fill_given) {
      f.fill = '0';
      if (!f.align && default_align == '>') f.align = '=';
    }
    ++k;
  }
  f.width = read_number(s, k);
  if (k < s.size() && (s[k] == ',' || s[k] == '_')) {
    f.grouping = char(s[k++]);
    if (k < s.size() && (s[k] == ',' || s[k] == '_')) fail("Cannot specify both ',' and '_'.");
  }
  if (k < s.size() && s[k] == '.') {
    ++k;
    size_t start = k;
    f.precision = read_number(s, k);
    if (k == start) fail("Format specifier missing precision");
  }
  if (s.size() - k > 1) fail("Invalid format specifier '{}' for object of type '{}'", text, type_name);
  if (k < s.size()) {
    if (s[k] >= 0x80) fail("Unknown format code for object of type '{}'", type_name);
    f.type = char(s[k]);
  }
  if (!f.align) f.align = default_align;
  return f;
}

// Pads `body` (`chars` code points) to the width; '=' puts the fill after the sign/prefix.
std::string pad(const std::string& lead, const std::string& body, const FormatSpec& f) {
  size_t chars = utf8_decode(lead).size() + utf8_decode(body).size();
  if (chars >= f.width) return lead + body;
  size_t n = f.width - chars, left = 0;
  if (f.align == '>' || f.align == '=') left = n;
  if (f.align == '^') left = n / 2;
  std::string fill;
  utf8_append(fill, f.fill);
  auto rep = [&](size_t m) {
    std::string r;
    for (size_t i = 0; i < m; ++i) r += fill;
    return r;
  };
  if (f.align == '=') return lead + rep(left) + body;
  return rep(left) + lead + body + rep(n - left);
}

// Inserts the grouping separator every `group` digits; with '0' fill and '=' alignment Python
// pads with grouped zeros up to the width (never starting with a separator).
std::string group_digits(const std::string& digits, char sep, size_t group, size_t min_width) {
  std::string out;
  size_t run = 0;
  for (size_t k = digits.size(); k-- > 0;) {
    if (run == group) out.insert(out.begin(), sep), run = 0;
    out.insert(out.begin(), digits[k]);
    ++run;
  }
  while (out.size() < min_width || out[0] == sep) {
    if (run == group) {
      out.insert(out.begin(), sep), run = 0;
    } else {
      out.insert(out.begin(), '0'), ++run;
    }
  }
  return out;
}

std::string sign_of(bool negative, const FormatSpec& f) {
  return negative ? "-" : f.sign == '+' ? "+" : f.sign == ' ' ? " " : "";
}

// Digits (with any grouping) and the lead (sign, prefix), zero-grouped when Python would.
std::string finish_number(std::string lead, const std::string& digits, const std::string& tail,
                          size_t group, const FormatSpec& f) {
  std::string body = digits;
  if (f.grouping) {
    size_t min = 0;
    if (f.fill == '0' && f.align == '=') {
      size_t used = lead.size() + tail.size();
      min = f.width > used ? f.width - used : 0;
    }
    body = group_digits(digits, f.grouping, group, min);
  }
  return pad(lead, body + tail, f);
}

std::string format_float_spec(double d, FormatSpec f, bool from_int) {
  char t = f.type;
  if (t == 'n') t = 'g';
  bool percent = t == '%';
  if (percent) d *= 100, t = 'f';
  bool add_dot0 = false;
  std::string text;
  const bool negative = std::signbit(d) && !std::isnan(d);
  const double mag = std::fabs(d);
  if (f.precision != SIZE_MAX && f.precision > 1000) fail("str.format: precision too big");
  if (std::isnan(d) || std::isinf(d)) {
    text = std::isnan(d) ? "nan" : "inf";
    if (t == 'E' || t == 'F' || t == 'G') text = std::isnan(d) ? "NAN" : "INF";
  } else if (t == 0 && f.precision == SIZE_MAX) {
    // No type, no precision: repr() of the float (str() for an int given no float type).
    text = from_int ? std::to_string(static_cast<int64_t>(mag)) : format_float(mag);
  } else {
    if (t == 0) t = 'g', add_dot0 = !from_int;
    size_t p = f.precision == SIZE_MAX ? 6 : f.precision;
    std::string fmt = std::string("%") + (f.alt ? "#" : "") + "." + std::to_string(p) + t;
    int n = std::snprintf(nullptr, 0, fmt.c_str(), mag);
    text.assign(size_t(n) + 1, '\0');
    std::snprintf(text.data(), text.size(), fmt.c_str(), mag);
    text.resize(size_t(n));
    if (add_dot0 && text.find_first_of(".e") == std::string::npos) text += ".0";
  }
  bool neg = negative;
  if (f.z && neg && text.find_first_not_of("0.eE+-%") == std::string::npos) neg = false;
  if (percent) text += '%';
  size_t int_end = text.find_first_not_of("0123456789");
  if (int_end == std::string::npos) int_end = text.size();
  return finish_number(sign_of(neg, f), text.substr(0, int_end), text.substr(int_end), 3, f);
}

std::string format_int_spec(int64_t n, const FormatSpec& f) {
  char t = f.type;
  if (t && std::string_view("eEfFgG%").find(t) != std::string_view::npos)
    return format_float_spec(static_cast<double>(n), f, true);
  if (t && std::string_view("bcdoxXn").find(t) == std::string_view::npos)
    fail("Unknown format code '{}' for object of type 'int'", t);
  if (f.precision != SIZE_MAX) fail("Precision not allowed in integer format specifier");
  if (f.grouping && t && t != 'd' && !(f.grouping == '_' && t != 'n' && t != 'c'))
    fail("Cannot specify '{}' with '{}'.", f.grouping, t);
  if (t == 'c') {
    if (f.sign) fail("Sign not allowed with integer format specifier 'c'");
    if (f.alt) fail("Alternate form (#) not allowed with integer format specifier 'c'");
    if (n < 0 || n > 0x10ffff) fail("%c arg not in range(0x110000)");
    std::string ch;
    utf8_append(ch, static_cast<char32_t>(n));
    return pad("", ch, f);
  }
  const unsigned base = t == 'b' ? 2 : t == 'o' ? 8 : (t == 'x' || t == 'X') ? 16 : 10;
  const std::string digits = int_digits(n, base, t == 'X');
  std::string lead = sign_of(n < 0, f);
  if (f.alt && base != 10) lead += base == 2 ? "0b" : base == 8 ? "0o" : t == 'X' ? "0X" : "0x";
  return finish_number(lead, digits, "", base == 10 ? 3 : 4, f);
}

std::string format_str_spec(const std::string& s, const FormatSpec& f) {
  if (f.type && f.type != 's') fail("Unknown format code '{}' for object of type 'str'", f.type);
  if (f.sign) fail("Sign not allowed in string format specifier");
  if (f.alt) fail("Alternate form (#) not allowed in string format specifier");
  if (f.z) fail("Negative zero coercion (z) not allowed in format specifier");
  if (f.align == '=') fail("'=' alignment not allowed in string format specifier");
  if (f.grouping) fail("Cannot specify '{}' with 's'.", f.grouping);
  if (f.precision == SIZE_MAX) return pad("", s, f);
  std::u32string c = utf8_decode(s);
  if (c.size() > f.precision) c.resize(f.precision);
  return pad("", utf8_encode(c), f);
}

// format(v, spec): what v.__format__(spec) returns.
std::string format_value(const Value& v, const std::string& spec) {
  switch (v.kind) {
    case Value::Kind::kString:
      return format_str_spec(v.s, parse_spec(spec, '<', "str"));
    case Value::Kind::kBool:
      if (spec.empty()) return to_str(v);
      return format_int_spec(v.as_int(), parse_spec(spec, '>', "bool"));
    case Value::Kind::kInt:
      if (v.big && spec.empty()) return to_str(v);
      return format_int_spec(v.as_int(), parse_spec(spec, '>', "int"));
    case Value::Kind::kFloat: {
      FormatSpec f = parse_spec(spec, '>', "float");
      if (f.type && std::string_view("eEfFgGn%").find(f.type) == std::string_view::npos)
        fail("Unknown format code '{}' for object of type 'float'", f.type);
      return format_float_spec(v.f, f, false);
    }
    default: {
      if (!spec.empty())
        fail("unsupported format string passed to {}.__format__",
             v.is_undefined() ? "Undefined" : v.is_none() ? "NoneType" : type_name(v));
      return v.is_undefined() ? "" : to_str(v);
    }
  }
}

// ascii(v): repr with non-ASCII code points escaped.
std::string ascii_repr(const Value& v) {
  std::string out;
  for (char32_t c : utf8_decode(repr(v))) {
    if (c < 0x80) {
      out += char(c);
      continue;
    }
    char buf[16];
    std::snprintf(buf, sizeof buf, c < 0x100 ? "\\x%02x" : c < 0x10000 ? "\\u%04x" : "\\U%08x",
                  unsigned(c));
    out += buf;
  }
  return out;
}

class Formatter {
 public:
  explicit Formatter(const CallArgs& a) : a_(a) {}

  std::string run(const std::string& s, int depth) {
    if (depth > 3) fail("Max string recursion exceeded");
    std::string out;
    for (size_t k = 0; k < s.size(); ++k) {
      char c = s[k];
      if (c == '}') {
        if (k + 1 < s.size() && s[k + 1] == '}') {
          out += '}', ++k;
          continue;
        }
        fail("str.format: single '}}' encountered in format string");
      }
      if (c != '{') {
        out += c;
        continue;
      }
      if (k + 1 < s.size() && s[k + 1] == '{') {
        out += '{', ++k;
        continue;
      }
      // The field runs to the '}' that balances its '{' (the spec may hold nested fields).
      size_t e = k + 1;
      for (int open = 1; e < s.size(); ++e) {
        if (s[e] == '{') ++open;
        if (s[e] == '}' && --open == 0) break;
      }
      if (e >= s.size())
        fail("str.format: {}", s.find(':', k) != std::string::npos ? "unmatched '{' in format spec"
                                                                    : "expected '}' before end of string");
      out += field(s.substr(k + 1, e - k - 1), depth);
      k = e;
    }
    return out;
  }

 private:
  std::string field(const std::string& f, int depth) {
    size_t k = 0;
    for (; k < f.size() && f[k] != ':' && f[k] != '!'; ++k) {
      if (f[k] == '{') fail("str.format: unexpected '{{' in field name");
      if (f[k] == '[')
        while (k < f.size() && f[k] != ']') ++k;
      if (k >= f.size()) break;
    }
    std::string name = f.substr(0, std::min(k, f.size()));
    char conv = 0;
    if (k < f.size() && f[k] == '!') {
      if (k + 1 >= f.size()) fail("str.format: end of string while looking for conversion specifier");
      conv = f[k + 1];
      k += 2;
      if (k < f.size() && f[k] != ':') fail("str.format: expected ':' after conversion specifier");
    }
    std::string spec = k < f.size() ? f.substr(k + 1) : std::string();
    Value v = lookup(name);
    if (conv == 'r') v = Value::string(repr(v));
    else if (conv == 's') v = Value::string(to_str(v));
    else if (conv == 'a') v = Value::string(ascii_repr(v));
    else if (conv) fail("Unknown conversion specifier {}", conv);
    if (spec.find('{') != std::string::npos) spec = run(spec, depth + 1);
    return format_value(v, spec);
  }

  // The first part picks the argument; then .attr / [key] steps go through the sandbox. As in
  // string.Formatter (which jinja2's sandbox runs), only a whole field of '' or of digits
  // takes part in automatic / manual numbering.
  Value lookup(const std::string& name) {
    size_t k = name.find_first_of(".[");
    std::string first = name.substr(0, k);
    const Value* arg = nullptr;
    int64_t idx = 0;
    if (name.empty()) {
      number(false);
      arg = auto_idx_ < a_.pos.size() ? &a_.pos[auto_idx_] : nullptr;
      ++auto_idx_;
    } else {
      if (all_cps(name, is_unicode_digit)) number(true);
      if (!first.empty() && decimal_index(first, idx))
        arg = idx >= 0 && size_t(idx) < a_.pos.size() ? &a_.pos[size_t(idx)] : nullptr;
      else
        arg = find_arg(a_, SIZE_MAX, first);
    }
    if (!arg) fail("str.format: no argument for field '{{{}}}'", first);
    Value v = *arg;
    while (k < name.size()) {
      if (name[k] == '.') {
        size_t e = name.find_first_of(".[", k + 1);
        std::string attr = name.substr(k + 1, e == std::string::npos ? std::string::npos : e - k - 1);
        if (attr.empty()) fail("str.format: empty attribute in format string");
        v = get_attr(v, attr);
        k = e == std::string::npos ? name.size() : e;
      } else if (name[k] == '[') {
        size_t e = name.find(']', k);
        if (e == std::string::npos) fail("str.format: missing ']' in format string");
        std::string key = name.substr(k + 1, e - k - 1);
        if (key.empty()) fail("str.format: empty attribute in format string");
        int64_t idx;
        v = get_item(v, decimal_index(key, idx) && key.find_first_not_of("0123456789") == std::string::npos
                            ? Value::integer(idx)
                            : Value::string(key));
        k = e + 1;
        if (k < name.size() && name[k] != '.' && name[k] != '[')
          fail("str.format: only '.' or '[' may follow ']' in format field specifier");
      } else {
        break;
      }
    }
    return v;
  }

  // Python refuses to mix '{}' and '{0}'.
  void number(bool manual) {
    if (manual ? auto_idx_ > 0 : numbering_ == kManual)
      fail("str.format: cannot switch from {}",
           manual ? "automatic field numbering to manual field specification"
                  : "manual field specification to automatic field numbering");
    if (manual) numbering_ = kManual;
  }

  const CallArgs& a_;
  size_t auto_idx_ = 0;
  enum { kNone, kManual } numbering_ = kNone;
};

}  // namespace

std::string py_str_format(const std::string& fmt, const CallArgs& args) {
  return Formatter(args).run(fmt, 1);
}

}  // namespace lite_llama::jinja

// The Python str/dict/list methods that chat templates call
// (message.content.split('</think>')[-1].lstrip('\n'), dict.get, ...), and argument helpers.
#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdint>

#include "core/error.h"
#include "core/utf8.h"
#include "template/jinja_builtins.h"

namespace lite_llama::jinja {

const Value* find_arg(const CallArgs& args, size_t pos, std::string_view name) {
  if (pos < args.pos.size()) return &args.pos[pos];
  for (const auto& [k, v] : args.kw)
    if (k == name) return &v;
  return nullptr;
}

Value arg_or(const CallArgs& args, size_t pos, std::string_view name, Value fallback) {
  const Value* v = find_arg(args, pos, name);
  return v ? *v : std::move(fallback);
}

const std::string& need_str(const Value& v, const char* what) {
  if (!v.is_string()) fail("{} must be str, not {}", what, type_name(v));
  return v.s;
}

// The code point of the well-formed UTF-8 character at s[k]; len gets its length.
static char32_t code_point_at(std::string_view s, size_t k, int& len) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  len = utf8_char_length(p + k, p + s.size());
  char32_t cp = len == 1 ? p[k] : p[k] & (0x7F >> len);
  for (int m = 1; m < len; ++m) cp = (cp << 6) | (p[k + m] & 0x3F);
  return cp;
}

bool decimal_index(std::string_view s, int64_t& index) {
  if (s.empty()) return false;
  // Any script's decimal digits, as Python's int() and str.format take them ('{١}' is field 1).
  uint64_t v = 0;
  bool past = false;
  for (char32_t c : utf8_decode(s)) {
    const int d = decimal_digit(c);
    if (d < 0) return false;
    if (v > (uint64_t(INT64_MAX) - uint64_t(d)) / 10) past = true;
    else v = v * 10 + uint64_t(d);
  }
  index = past ? -1 : int64_t(v);
  return true;
}

std::string py_strip(const std::string& s, const Value& chars, bool left, bool right) {
  std::u32string set;
  bool ws = chars.is_none() || chars.is_undefined();
  if (!ws) set = utf8_decode(need_str(chars, "strip arg"));
  auto strip_me = [&](char32_t c) {
    return ws ? is_unicode_space(c) : set.find(c) != std::u32string::npos;
  };
  if (is_valid_utf8(s)) {
    // Only the ends are decoded: a long message content is trimmed on every request.
    size_t b = 0, e = s.size();
    int len = 0;
    if (left)
      while (b < e && strip_me(code_point_at(s, b, len))) b += size_t(len);
    if (right)
      while (e > b) {
        size_t k = e - 1;
        while (k > b && (uint8_t(s[k]) & 0xC0) == 0x80) --k;
        if (!strip_me(code_point_at(s, k, len))) break;
        e = k;
      }
    return s.substr(b, e - b);
  }
  std::u32string cps = utf8_decode(s);
  size_t b = 0, e = cps.size();
  if (left)
    while (b < e && strip_me(cps[b])) ++b;
  if (right)
    while (e > b && strip_me(cps[e - 1])) --e;
  return utf8_encode(std::u32string_view(cps).substr(b, e - b));
}

std::string py_lower(const std::string& s) {
  std::u32string c = utf8_decode(s);
  for (auto& ch : c) ch = to_lower(ch);
  return utf8_encode(c);
}

std::string py_upper(const std::string& s) {
  std::u32string out;
  for (char32_t ch : utf8_decode(s)) {
    if (ch == 0xdf) {  // the one common special casing: "ß".upper() == "SS"
      out += U"SS";
    } else {
      out += to_upper(ch);
    }
  }
  return utf8_encode(out);
}

std::string py_capitalize(const std::string& s) {
  std::u32string c = utf8_decode(s);
  for (size_t k = 0; k < c.size(); ++k) c[k] = k == 0 ? to_upper(c[k]) : to_lower(c[k]);
  return utf8_encode(c);
}

static std::string py_title(const std::string& s) {
  std::u32string c = utf8_decode(s);
  bool prev_cased = false;
  for (auto& ch : c) {
    ch = prev_cased ? to_lower(ch) : to_upper(ch);
    prev_cased = is_cased_letter(ch);
  }
  return utf8_encode(c);
}

std::string py_replace(const std::string& s, const std::string& old, const std::string& rep,
                       int64_t count) {
  std::string out;
  if (old.empty()) {  // Python inserts the replacement around every character
    std::u32string c = utf8_decode(s);
    for (size_t k = 0; k <= c.size(); ++k) {
      if (count < 0 || static_cast<int64_t>(k) < count) out += rep;
      if (k < c.size()) utf8_append(out, c[k]);
    }
    return out;
  }
  size_t pos = 0;
  for (int64_t n = 0; count < 0 || n < count; ++n) {
    size_t hit = s.find(old, pos);
    if (hit == std::string::npos) break;
    out.append(s, pos, hit - pos);
    out += rep;
    pos = hit + old.size();
  }
  out.append(s, pos, std::string::npos);
  return out;
}

static Value split_impl(const std::string& s, const Value& sep_v, int64_t maxsplit,
                        bool from_right) {
  ValueList parts;
  if (sep_v.is_none() || sep_v.is_undefined()) {  // runs of whitespace, empty strings dropped
    std::u32string c = utf8_decode(s);
    std::vector<std::u32string> words;
    if (!from_right) {
      size_t k = 0;
      while (k < c.size()) {
        while (k < c.size() && is_unicode_space(c[k])) ++k;
        if (k == c.size()) break;
        if (maxsplit >= 0 && static_cast<int64_t>(words.size()) == maxsplit) {
          words.push_back(c.substr(k));  // the rest keeps its trailing whitespace, as in Python
          break;
        }
        size_t b = k;
        while (k < c.size() && !is_unicode_space(c[k])) ++k;
        words.push_back(c.substr(b, k - b));
      }
    } else {
      size_t k = c.size();
      while (k > 0) {
        while (k > 0 && is_unicode_space(c[k - 1])) --k;
        if (k == 0) break;
        if (maxsplit >= 0 && static_cast<int64_t>(words.size()) == maxsplit) {
          words.push_back(c.substr(0, k));  // the rest keeps its leading whitespace
          break;
        }
        size_t e = k;
        while (k > 0 && !is_unicode_space(c[k - 1])) --k;
        words.push_back(c.substr(k, e - k));
      }
      std::reverse(words.begin(), words.end());
    }
    for (auto& w : words) parts.push_back(Value::string(utf8_encode(w)));
    return Value::make_list(std::move(parts));
  }
  const std::string& sep = need_str(sep_v, "separator");
  if (sep.empty()) fail("empty separator");
  std::vector<std::string> pieces;
  if (!from_right) {
    size_t pos = 0;
    while (maxsplit < 0 || static_cast<int64_t>(pieces.size()) < maxsplit) {
      size_t hit = s.find(sep, pos);
      if (hit == std::string::npos) break;
      pieces.push_back(s.substr(pos, hit - pos));
      pos = hit + sep.size();
    }
    pieces.push_back(s.substr(pos));
  } else {
    size_t end = s.size();
    while (maxsplit < 0 || static_cast<int64_t>(pieces.size()) < maxsplit) {
      if (end < sep.size()) break;
      size_t hit = s.rfind(sep, end - sep.size());
      if (hit == std::string::npos) break;
      pieces.push_back(s.substr(hit + sep.size(), end - hit - sep.size()));
      end = hit;
    }
    pieces.push_back(s.substr(0, end));
    std::reverse(pieces.begin(), pieces.end());
  }
  for (auto& p : pieces) parts.push_back(Value::string(std::move(p)));
  return Value::make_list(std::move(parts));
}

static int64_t cp_index(const std::string& s, size_t byte_pos) {
  return static_cast<int64_t>(utf8_decode(std::string_view(s).substr(0, byte_pos)).size());
}

// The optional start / end of find, count, startswith, ... : characters [first, last) of s, as
// CPython adjusts them (negatives from the end; start is not cut to the length, so that a sub of
// n characters matches only where last - first >= n).
struct StrRange {
  std::string text;
  int64_t first = 0, last = 0;
  bool room(const std::string& sub) const { return last - first >= static_cast<int64_t>(utf8_decode(sub).size()); }
};
static StrRange str_range(const std::string& s, const Value& start, const Value& end) {
  const std::u32string c = utf8_decode(s);
  const int64_t n = static_cast<int64_t>(c.size());
  auto index = [&](const Value& v, int64_t none) {
    if (v.is_none()) return none;
    if (!v.is_integral()) fail("slice indices must be integers or None");
    const int64_t i = v.as_int();
    return i < 0 ? std::max<int64_t>(0, i + n) : i;
  };
  StrRange r;
  r.first = index(start, 0), r.last = std::min(index(end, n), n);
  if (r.first < r.last) r.text = utf8_encode(c.substr(size_t(r.first), size_t(r.last - r.first)));
  return r;
}

static bool affix_match(const StrRange& r, const Value& affix, bool prefix) {
  const std::string& s = r.text;
  auto one = [&](const Value& a) {
    const std::string& x = need_str(a, prefix ? "startswith arg" : "endswith arg");
    if (!r.room(x)) return false;
    return prefix ? s.compare(0, x.size(), x) == 0
                  : s.compare(s.size() - x.size(), x.size(), x) == 0;
  };
  if (affix.is_list()) {
    for (const auto& a : *affix.list)
      if (one(a)) return true;
    return false;
  }
  return one(affix);
}

bool all_cps(std::string_view s, bool (*pred)(char32_t)) {
  std::u32string c = utf8_decode(s);
  if (c.empty()) return false;
  for (char32_t ch : c)
    if (!pred(ch)) return false;
  return true;
}

static Value call_str_method(const std::string& s, const std::string& m, CallArgs& a) {
  auto str_arg = [&](size_t i, const char* n) {
    return need_str(arg_or(a, i, n, Value::none()), n);
  };
  auto int_arg = [&](size_t i, const char* n, int64_t d) {
    Value v = arg_or(a, i, n, Value::integer(d));
    if (!v.is_integral()) fail("{}() argument '{}' must be int", m, n);
    return v.as_int();
  };
  if (m == "strip")
    return Value::string(py_strip(s, arg_or(a, 0, "chars", Value::none()), true, true));
  if (m == "lstrip")
    return Value::string(py_strip(s, arg_or(a, 0, "chars", Value::none()), true, false));
  if (m == "rstrip")
    return Value::string(py_strip(s, arg_or(a, 0, "chars", Value::none()), false, true));
  if (m == "split" || m == "rsplit")
    return split_impl(s, arg_or(a, 0, "sep", Value::none()), int_arg(1, "maxsplit", -1),
                      m == "rsplit");
  auto range = [&] { return str_range(s, arg_or(a, 1, "start", Value::none()), arg_or(a, 2, "end", Value::none())); };
  if (m == "startswith")
    return Value::boolean(affix_match(range(), arg_or(a, 0, "prefix", Value::none()), true));
  if (m == "endswith")
    return Value::boolean(affix_match(range(), arg_or(a, 0, "suffix", Value::none()), false));
  if (m == "lower") return Value::string(py_lower(s));
  if (m == "upper") return Value::string(py_upper(s));
  if (m == "title") return Value::string(py_title(s));
  if (m == "capitalize") return Value::string(py_capitalize(s));
  if (m == "replace")
    return Value::string(
        py_replace(s, str_arg(0, "old"), str_arg(1, "new"), int_arg(2, "count", -1)));
  if (m == "find" || m == "index" || m == "rfind" || m == "rindex") {
    const std::string& sub = str_arg(0, "sub");
    const StrRange r = range();
    const size_t hit = !r.room(sub) ? std::string::npos : m[0] == 'r' ? r.text.rfind(sub) : r.text.find(sub);
    if (hit == std::string::npos) {
      if (m == "index" || m == "rindex") fail("substring not found");
      return Value::integer(-1);
    }
    return Value::integer(r.first + cp_index(r.text, hit));
  }
  if (m == "count") {
    const std::string& sub = str_arg(0, "sub");
    const StrRange r = range();
    if (!r.room(sub)) return Value::integer(0);
    if (sub.empty()) return Value::integer(r.last - r.first + 1);
    int64_t n = 0;
    for (size_t pos = r.text.find(sub); pos != std::string::npos; pos = r.text.find(sub, pos + sub.size()))
      ++n;
    return Value::integer(n);
  }
  if (m == "join") {
    std::string out;
    bool first = true;
    for (const Value& v : iterate(arg_or(a, 0, "iterable", Value::make_list({})))) {
      if (!first) out += s;
      first = false;
      out += need_str(v, "sequence item");
    }
    return Value::string(out);
  }
  if (m == "format") return Value::string(py_str_format(s, a));
  if (m == "splitlines") {
    // Python's line boundaries: \n \r \r\n \v \f \x1c-\x1e \x85 U+2028 U+2029.
    const bool keepends = truthy(arg_or(a, 0, "keepends", Value::boolean(false)));
    std::u32string c = utf8_decode(s);
    ValueList lines;
    size_t b = 0;
    for (size_t k = 0; k < c.size(); ++k) {
      char32_t ch = c[k];
      if (!(ch == '\n' || ch == '\r' || ch == '\v' || ch == '\f' || (ch >= 0x1c && ch <= 0x1e) ||
            ch == 0x85 || ch == 0x2028 || ch == 0x2029))
        continue;
      size_t end = k;
      if (ch == '\r' && k + 1 < c.size() && c[k + 1] == '\n') ++k;
      lines.push_back(Value::string(utf8_encode(c.substr(b, (keepends ? k + 1 : end) - b))));
      b = k + 1;
    }
    if (b < c.size()) lines.push_back(Value::string(utf8_encode(c.substr(b))));
    return Value::make_list(std::move(lines));
  }
  if (m == "partition" || m == "rpartition") {
    const std::string& sep = str_arg(0, "sep");
    if (sep.empty()) fail("empty separator");
    size_t hit = m == "partition" ? s.find(sep) : s.rfind(sep);
    if (hit == std::string::npos)
      return Value::make_tuple(m == "partition"
                                   ? ValueList{Value::string(s), Value::string(""), Value::string("")}
                                   : ValueList{Value::string(""), Value::string(""), Value::string(s)});
    return Value::make_tuple({Value::string(s.substr(0, hit)), Value::string(sep),
                              Value::string(s.substr(hit + sep.size()))});
  }
  if (m == "removeprefix" || m == "removesuffix") {
    const std::string& x = str_arg(0, "affix");
    bool pre = m == "removeprefix";
    if (x.size() <= s.size() &&
        (pre ? s.compare(0, x.size(), x) == 0 : s.compare(s.size() - x.size(), x.size(), x) == 0))
      return Value::string(pre ? s.substr(x.size()) : s.substr(0, s.size() - x.size()));
    return Value::string(s);
  }
  if (m == "isspace") return Value::boolean(all_cps(s, is_unicode_space));
  if (m == "isdigit")
    return Value::boolean(all_cps(s, is_unicode_digit));
  if (m == "isalpha")
    return Value::boolean(all_cps(s, [](char32_t c) { return is_cased_letter(c) || c > 0x2e7f; }));
  if (m == "isalnum")
    return Value::boolean(all_cps(
        s, [](char32_t c) { return is_unicode_digit(c) || is_cased_letter(c) || c > 0x2e7f; }));
  if (m == "islower") return Value::boolean(py_lower(s) == s && py_upper(s) != s);
  if (m == "isupper") return Value::boolean(py_upper(s) == s && py_lower(s) != s);
  if (m == "zfill" || m == "ljust" || m == "rjust" || m == "center") {
    int64_t width = int_arg(0, "width", 0);
    int64_t len = static_cast<int64_t>(utf8_decode(s).size());
    if (width <= len) return Value::string(s);
    std::string fill =
        m == "zfill" ? "0" : (find_arg(a, 1, "fillchar") ? str_arg(1, "fillchar") : " ");
    int64_t pad = width - len, left = m == "rjust" || m == "zfill" ? pad
                                      : m == "center"              ? pad / 2 + (pad & width & 1)
                                                                   : 0;
    std::string out, body = s;
    if (m == "zfill" && !s.empty() && (s[0] == '+' || s[0] == '-')) {  // the sign stays first
      out = s.substr(0, 1);
      body = s.substr(1);
    }
    for (int64_t k = 0; k < left; ++k) out += fill;
    out += body;
    for (int64_t k = left; k < pad; ++k) out += fill;
    return Value::string(out);
  }
  fail("unsupported str method '{}'", m);
}

Value call_method(const Value& obj, const std::string& m, CallArgs& a) {
  if (obj.is_string()) return call_str_method(obj.s, m, a);
  if (obj.is_dict()) {
    const Dict& d = *obj.dict;
    if (m == "get") {
      const Value* hit = d.find(need_str(arg_or(a, 0, "key", Value::none()), "dict key"));
      return hit ? *hit : arg_or(a, 1, "default", Value::none());
    }
    ValueList out;
    for (const auto& [k, v] : d.items) {
      if (m == "keys") out.push_back(Value::string(k));
      if (m == "values") out.push_back(v);
      if (m == "items") out.push_back(Value::make_tuple({Value::string(k), v}));
    }
    return Value::make_list(std::move(out));
  }
  if (obj.is_list()) {
    const Value& x = arg_or(a, 0, "value", Value::none());
    int64_t n = 0;
    for (size_t k = 0; k < obj.list->size(); ++k) {
      if (!equals((*obj.list)[k], x)) continue;
      if (m == "index") return Value::integer(static_cast<int64_t>(k));
      ++n;
    }
    if (m == "index") fail("{} is not in list", repr(x));
    return Value::integer(n);
  }
  fail("'{}' object has no method '{}'", type_name(obj), m);
}

}  // namespace lite_llama::jinja

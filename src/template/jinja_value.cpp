// Python-compatible behaviour of template values: str()/repr()/json.dumps() output, equality
// (ordering is with the operators, jinja_operators.cpp), and the small part of Unicode (code
// points, whitespace, case) that str methods need.
#include "template/jinja_value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <type_traits>

#include "core/error.h"
#include "template/jinja_bigint.h"

namespace lite_llama::jinja {

Value Value::undefined(std::string hint) {
  Value v;
  v.s = std::move(hint);
  return v;
}
Value Value::none() {
  Value v;
  v.kind = Kind::kNone;
  return v;
}
Value Value::boolean(bool x) {
  Value v;
  v.kind = Kind::kBool;
  v.b = x;
  return v;
}
Value Value::integer(int64_t x) {
  Value v;
  v.kind = Kind::kInt;
  v.i = x;
  return v;
}
Value Value::number(double x) {
  Value v;
  v.kind = Kind::kFloat;
  v.f = x;
  return v;
}
Value Value::string(std::string x) {
  Value v;
  v.kind = Kind::kString;
  v.s = std::move(x);
  return v;
}
Value Value::make_list(ValueList items) {
  Value v;
  v.kind = Kind::kList;
  v.list = std::make_shared<ValueList>(std::move(items));
  return v;
}
Value Value::make_tuple(ValueList items) {
  Value v = make_list(std::move(items));
  v.is_tuple = true;
  return v;
}
Value Value::make_range(ValueList items, Value start, Value stop, Value step) {
  Value v = make_list(std::move(items));
  v.range = std::make_shared<const PyRange>(PyRange{std::move(start), std::move(stop), std::move(step)});
  return v;
}
Value Value::make_dict(Dict d) {
  Value v;
  v.kind = Kind::kDict;
  v.dict = std::make_shared<Dict>(std::move(d));
  return v;
}
Value Value::make_namespace(Dict d) {
  Value v = make_dict(std::move(d));
  v.kind = Kind::kNamespace;
  return v;
}
Value Value::function(std::string name, NativeFn fn) {
  Value v;
  v.kind = Kind::kFunction;
  v.s = std::move(name);
  v.fn = std::make_shared<NativeFn>(std::move(fn));
  return v;
}

const Value* Dict::find(std::string_view key) const {
  for (const auto& [k, v] : items)
    if (k == key) return &v;
  return nullptr;
}
Value* Dict::find(std::string_view key) {
  for (auto& [k, v] : items)
    if (k == key) return &v;
  return nullptr;
}
void Dict::set(const std::string& key, Value v) {
  if (Value* slot = find(key)) {
    *slot = std::move(v);
  } else {
    items.emplace_back(key, std::move(v));
  }
}

// Deeper JSON than any chat needs is refused: conversion, printing and tojson all recurse.
constexpr int kMaxJsonDepth = 256;

// J may be const (strings copied) or not (strings moved out of j).
template <typename J>
static Value convert_json(J& j, int depth = 0) {
  if (depth > kMaxJsonDepth) fail("context JSON is nested deeper than {} levels", kMaxJsonDepth);
  switch (j.type()) {
    case nlohmann::json::value_t::null:
      return Value::none();
    case nlohmann::json::value_t::boolean:
      return Value::boolean(j.template get<bool>());
    case nlohmann::json::value_t::number_integer:
      return Value::integer(j.template get<int64_t>());
    case nlohmann::json::value_t::number_unsigned:
      return Value::integer(*BigInt::parse(std::to_string(j.template get<uint64_t>())));
    case nlohmann::json::value_t::number_float:
      return Value::number(j.template get<double>());
    case nlohmann::json::value_t::string:
      if constexpr (std::is_const_v<J>)
        return Value::string(j.template get<std::string>());
      else
        return Value::string(std::move(j.template get_ref<std::string&>()));
    case nlohmann::json::value_t::array: {
      ValueList items;
      items.reserve(j.size());
      for (auto& e : j) items.push_back(convert_json(e, depth + 1));
      return Value::make_list(std::move(items));
    }
    case nlohmann::json::value_t::object: {
      Dict d;
      d.items.reserve(j.size());
      for (auto it = j.begin(); it != j.end(); ++it)
        d.items.emplace_back(it.key(), convert_json(it.value(), depth + 1));
      return Value::make_dict(std::move(d));
    }
    default:
      fail("unsupported JSON value of type {} in the context", j.type_name());
  }
}

Value from_json(const nlohmann::ordered_json& j) { return convert_json(j); }
Value from_json(const nlohmann::json& j) { return convert_json(j); }
Value from_json(nlohmann::ordered_json&& j) { return convert_json(j); }

bool truthy(const Value& v) {
  switch (v.kind) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone:
      return false;
    case Value::Kind::kBool:
      return v.b;
    case Value::Kind::kInt:
      return v.big || v.i != 0;
    case Value::Kind::kFloat:
      return v.f != 0.0;
    case Value::Kind::kString:
      return !v.s.empty();
    case Value::Kind::kList:
      return !v.list->empty();
    case Value::Kind::kDict:
      return !v.dict->items.empty();
    default:
      return true;
  }
}

std::string type_name(const Value& v) {
  switch (v.kind) {
    case Value::Kind::kUndefined:
      return "Undefined";
    case Value::Kind::kNone:
      return "NoneType";
    case Value::Kind::kBool:
      return "bool";
    case Value::Kind::kInt:
      return "int";
    case Value::Kind::kFloat:
      return "float";
    case Value::Kind::kString:
      return "str";
    case Value::Kind::kList:
      return v.range ? "range" : v.is_tuple ? "tuple" : "list";
    case Value::Kind::kDict:
      return "dict";
    case Value::Kind::kNamespace:
      return "TemplateNamespace";  // transformers' namespace() class
    case Value::Kind::kFunction:
      return v.dict ? "Macro" : "function";  // only macros carry attributes
  }
  return "object";
}

std::string format_float(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  std::string sci(buf, res.ptr);  // shortest round-trip digits, e.g. "-1.25e+02"
  bool neg = sci[0] == '-';
  if (neg) sci.erase(0, 1);
  size_t epos = sci.find('e');
  int exp = std::stoi(sci.substr(epos + 1));
  std::string digits;
  for (size_t k = 0; k < epos; ++k)
    if (sci[k] != '.') digits += sci[k];
  std::string out = neg ? "-" : "";
  if (exp >= -4 && exp < 16) {  // CPython's repr switches to exponent form outside this range
    if (exp >= 0) {
      if (digits.size() <= static_cast<size_t>(exp) + 1) {
        out += digits + std::string(exp + 1 - digits.size(), '0') + ".0";
      } else {
        out += digits.substr(0, exp + 1) + "." + digits.substr(exp + 1);
      }
    } else {
      out += "0." + std::string(-exp - 1, '0') + digits;
    }
    return out;
  }
  out += digits.substr(0, 1);
  if (digits.size() > 1) out += "." + digits.substr(1);
  char ebuf[16];
  std::snprintf(ebuf, sizeof ebuf, "e%c%02d", exp < 0 ? '-' : '+', std::abs(exp));
  return out + ebuf;
}

static bool repr_printable(char32_t c) {
  if (c < 0x20 || c == 0x7f) return false;
  if (c >= 0x80 && c <= 0xa0) return false;
  if (c == 0xad || (c >= 0x2000 && c <= 0x200f) || (c >= 0x2028 && c <= 0x202f)) return false;
  if ((c >= 0x205f && c <= 0x206f) || c == 0x3000 || c == 0xfeff) return false;
  return true;
}

static std::string repr_string(const std::string& s) {
  bool has_single = s.find('\'') != std::string::npos;
  bool has_double = s.find('"') != std::string::npos;
  char quote = (has_single && !has_double) ? '"' : '\'';
  std::string out(1, quote);
  for (char32_t c : utf8_decode(s)) {
    if (c == static_cast<char32_t>(quote) || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (!repr_printable(c)) {
      char buf[16];
      if (c <= 0xff) {
        std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned>(c));
      } else {
        std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
      }
      out += buf;
    } else {
      utf8_append(out, c);
    }
  }
  out += quote;
  return out;
}

std::string repr(const Value& v) {
  switch (v.kind) {
    case Value::Kind::kString:
      return repr_string(v.s);
    case Value::Kind::kList: {
      if (v.range) {
        const PyRange& r = *v.range;
        const bool unit = r.step.i == 1 && !r.step.big;
        return "range(" + repr(r.start) + ", " + repr(r.stop) + (unit ? "" : ", " + repr(r.step)) + ")";
      }
      std::string out = v.is_tuple ? "(" : "[";
      for (size_t k = 0; k < v.list->size(); ++k) {
        if (k) out += ", ";
        out += repr((*v.list)[k]);
      }
      if (v.is_tuple) return out + (v.list->size() == 1 ? ",)" : ")");
      return out + "]";
    }
    case Value::Kind::kDict: {
      std::string out = "{";
      bool first = true;
      for (const auto& [key, val] : v.dict->items) {
        if (!first) out += ", ";
        first = false;
        out += repr_string(key) + ": " + repr(val);
      }
      return out + "}";
    }
    case Value::Kind::kUndefined:
      return "Undefined";  // what jinja2 shows for an Undefined inside a printed list
    default:
      return to_str(v);
  }
}

std::string to_str(const Value& v) {
  switch (v.kind) {
    case Value::Kind::kUndefined:
      return "";
    case Value::Kind::kNone:
      return "None";
    case Value::Kind::kBool:
      return v.b ? "True" : "False";
    case Value::Kind::kInt:
      return v.big ? v.big->to_string() : std::to_string(v.i);
    case Value::Kind::kFloat:
      return format_float(v.f);
    case Value::Kind::kString:
      return v.s;
    case Value::Kind::kNamespace:
      return "<Namespace " + repr(Value::make_dict(*v.dict)) + ">";
    case Value::Kind::kFunction:  // macros carry attributes; jinja2 prints them as Macro objects
      if (!v.dict) return "<function " + v.s + ">";
      if (const Value* n = v.dict->find("name"); n && n->is_none()) return "<Macro anonymous>";
      return "<Macro " + repr_string(v.s) + ">";
    default:
      return repr(v);
  }
}

static void json_string(std::string& out, const std::string& s, bool ensure_ascii) {
  out += '"';
  for (char32_t c : utf8_decode(s)) {
    switch (c) {
      case '"':
        out += "\\\"";
        continue;
      case '\\':
        out += "\\\\";
        continue;
      case '\n':
        out += "\\n";
        continue;
      case '\r':
        out += "\\r";
        continue;
      case '\t':
        out += "\\t";
        continue;
      case '\b':
        out += "\\b";
        continue;
      case '\f':
        out += "\\f";
        continue;
      default:
        break;
    }
    char buf[16];
    if (c < 0x20 || (ensure_ascii && c >= 0x7f)) {
      if (c > 0xffff) {  // json.dumps writes astral characters as surrogate pairs
        char32_t u = c - 0x10000;
        std::snprintf(buf, sizeof buf, "\\u%04x\\u%04x", static_cast<unsigned>(0xd800 + (u >> 10)),
                      static_cast<unsigned>(0xdc00 + (u & 0x3ff)));
      } else {
        std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
      }
      out += buf;
    } else {
      utf8_append(out, c);
    }
  }
  out += '"';
}

static void json_value(std::string& out, const Value& v, const JsonOptions& o, int level) {
  auto newline = [&](int lvl) {
    if (o.indent < 0) return;
    out += '\n';
    out.append(static_cast<size_t>(o.indent) * lvl, ' ');
  };
  switch (v.kind) {
    case Value::Kind::kNone:
      out += "null";
      return;
    case Value::Kind::kBool:
      out += v.b ? "true" : "false";
      return;
    case Value::Kind::kInt:
      out += v.big ? v.big->to_string() : std::to_string(v.i);
      return;
    case Value::Kind::kFloat:
      if (std::isnan(v.f)) {
        out += "NaN";
      } else if (std::isinf(v.f)) {
        out += v.f > 0 ? "Infinity" : "-Infinity";
      } else {
        out += format_float(v.f);
      }
      return;
    case Value::Kind::kString:
      json_string(out, v.s, o.ensure_ascii);
      return;
    case Value::Kind::kList: {
      if (v.range) fail("Object of type range is not JSON serializable");
      if (v.list->empty()) {
        out += "[]";
        return;
      }
      out += '[';
      for (size_t k = 0; k < v.list->size(); ++k) {
        if (k) out += o.item_sep;
        newline(level + 1);
        json_value(out, (*v.list)[k], o, level + 1);
      }
      newline(level);
      out += ']';
      return;
    }
    case Value::Kind::kDict: {
      if (v.dict->items.empty()) {
        out += "{}";
        return;
      }
      std::vector<const std::pair<std::string, Value>*> entries;
      for (const auto& e : v.dict->items) entries.push_back(&e);
      if (o.sort_keys)
        std::stable_sort(entries.begin(), entries.end(),
                         [](auto* a, auto* b) { return a->first < b->first; });
      out += '{';
      for (size_t k = 0; k < entries.size(); ++k) {
        if (k) out += o.item_sep;
        newline(level + 1);
        json_string(out, entries[k]->first, o.ensure_ascii);
        out += o.key_sep;
        json_value(out, entries[k]->second, o, level + 1);
      }
      newline(level);
      out += '}';
      return;
    }
    default:
      fail("Object of type {} is not JSON serializable", type_name(v));
  }
}

std::string to_json(const Value& v, JsonOptions opt) {
  if (!opt.custom_separators) {
    opt.item_sep = opt.indent < 0 ? ", " : ",";
    opt.key_sep = ": ";
  }
  std::string out;
  json_value(out, v, opt, 0);
  return out;
}

bool equals(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    auto nan = [](const Value& v) { return v.kind == Value::Kind::kFloat && std::isnan(v.f); };
    if (a.big || b.big) return !nan(a) && !nan(b) && big_compare(a, b) == 0;
    if (a.is_integral() && b.is_integral()) return a.as_int() == b.as_int();
    return a.as_double() == b.as_double();
  }
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone:
      return true;
    case Value::Kind::kString:
      return a.s == b.s;
    case Value::Kind::kList:  // a tuple never equals a list, nor a range either, as in Python
      if (a.is_tuple != b.is_tuple || !a.range != !b.range || a.list->size() != b.list->size()) return false;
      for (size_t k = 0; k < a.list->size(); ++k)
        if (!equals((*a.list)[k], (*b.list)[k])) return false;
      return true;
    case Value::Kind::kDict:
      if (a.dict->items.size() != b.dict->items.size()) return false;
      for (const auto& [key, val] : a.dict->items) {
        const Value* other = b.dict->find(key);
        if (!other || !equals(val, *other)) return false;
      }
      return true;
    case Value::Kind::kNamespace:
      return a.dict == b.dict;
    case Value::Kind::kFunction:
      return a.fn == b.fn;
    default:
      return false;
  }
}

std::u32string utf8_decode(std::string_view s) {
  std::u32string out;
  out.reserve(s.size());
  for (size_t k = 0; k < s.size();) {
    unsigned char c = static_cast<unsigned char>(s[k]);
    int len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (len == 0 ||
        k + len > s.size()) {  // invalid byte: keep it as a code point so nothing is lost
      out += static_cast<char32_t>(c);
      ++k;
      continue;
    }
    char32_t cp = len == 1 ? c : (c & (0x7f >> len));
    for (int m = 1; m < len; ++m) cp = (cp << 6) | (static_cast<unsigned char>(s[k + m]) & 0x3f);
    out += cp;
    k += len;
  }
  return out;
}

void utf8_append(std::string& out, char32_t c) {
  if (c < 0x80) {
    out += static_cast<char>(c);
  } else if (c < 0x800) {
    out += static_cast<char>(0xc0 | (c >> 6));
    out += static_cast<char>(0x80 | (c & 0x3f));
  } else if (c < 0x10000) {
    out += static_cast<char>(0xe0 | (c >> 12));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (c & 0x3f));
  } else {
    out += static_cast<char>(0xf0 | (c >> 18));
    out += static_cast<char>(0x80 | ((c >> 12) & 0x3f));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (c & 0x3f));
  }
}

std::string utf8_encode(std::u32string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char32_t c : s) utf8_append(out, c);
  return out;
}

bool is_unicode_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x20) || c == 0x85 || c == 0xa0 ||
         c == 0x1680 || (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 || c == 0x202f ||
         c == 0x205f || c == 0x3000;
}

// Simple case mapping for ASCII, Latin-1, Latin Extended-A, Greek and Cyrillic; other scripts are
// left as they are (a documented limit of the engine).
char32_t to_lower(char32_t c) {
  if (c >= 'A' && c <= 'Z') return c + 32;
  if (c < 0xc0) return c;
  if ((c >= 0xc0 && c <= 0xde && c != 0xd7) || (c >= 0x391 && c <= 0x3ab && c != 0x3a2) ||
      (c >= 0x410 && c <= 0x42f))
    return c + 32;
  if (c >= 0x400 && c <= 0x40f) return c + 80;
  if (c == 0x178) return 0xff;
  if ((c >= 0x100 && c <= 0x137) || (c >= 0x14a && c <= 0x177)) return c | 1;
  if ((c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17e)) return (c & 1) ? c + 1 : c;
  return c;
}

char32_t to_upper(char32_t c) {
  if (c >= 'a' && c <= 'z') return c - 32;
  if (c < 0xb5) return c;
  if ((c >= 0xe0 && c <= 0xfe && c != 0xf7) || (c >= 0x3b1 && c <= 0x3cb && c != 0x3c2) ||
      (c >= 0x430 && c <= 0x44f))
    return c - 32;
  if (c >= 0x450 && c <= 0x45f) return c - 80;
  if (c == 0xff) return 0x178;
  if ((c >= 0x100 && c <= 0x137) || (c >= 0x14a && c <= 0x177))
    return c & ~static_cast<char32_t>(1);
  if ((c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17e)) return (c & 1) ? c : c - 1;
  return c;
}

bool is_cased_letter(char32_t c) { return c == 0xdf || to_lower(c) != c || to_upper(c) != c; }

namespace {
#include "template/unicode_digits.inc"
}  // namespace

int decimal_digit(char32_t c) {
  if (c >= '0' && c <= '9') return int(c - '0');
  if (c < 0x660) return -1;
  const char32_t* z = std::upper_bound(std::begin(kDecimalZeros), std::end(kDecimalZeros), c);
  return z != std::begin(kDecimalZeros) && c - z[-1] < 10 ? int(c - z[-1]) : -1;
}

bool is_unicode_digit(char32_t c) {
  if (decimal_digit(c) >= 0) return true;
  for (const auto& r : kOtherDigits)
    if (c >= r[0] && c <= r[1]) return true;
  return false;
}

}  // namespace lite_llama::jinja

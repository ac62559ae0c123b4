// jinja2's built-in filters (the subset chat templates use), with transformers' tojson
// override (json.dumps with ensure_ascii=False and optional indent/separators/sort_keys).
#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cctype>
#include <cstdlib>
#include <unordered_map>

#include "core/error.h"
#include "template/jinja_bigint.h"
#include "template/jinja_builtins.h"

namespace lite_llama::jinja {

namespace {

using FilterFn = Value (*)(const Value&, CallArgs&);

int64_t int_arg(const CallArgs& a, size_t pos, const char* name, int64_t dflt) {
  Value v = arg_or(a, pos, name, Value::integer(dflt));
  if (!v.is_integral()) fail("argument '{}' must be an integer, not {}", name, type_name(v));
  return v.as_int();
}

// Sort/unique keys: strings compare case-insensitively unless case_sensitive.
Value sort_key(const Value& v, bool case_sensitive) {
  return !case_sensitive && v.is_string() ? Value::string(py_lower(v.s)) : v;
}

Value f_length(const Value& v, CallArgs&) {
  return Value::integer(static_cast<int64_t>(py_len(v)));
}
Value f_string(const Value& v, CallArgs&) { return Value::string(to_str(v)); }
Value f_safe(const Value& v, CallArgs&) { return v; }
Value f_lower(const Value& v, CallArgs&) { return Value::string(py_lower(to_str(v))); }
Value f_upper(const Value& v, CallArgs&) { return Value::string(py_upper(to_str(v))); }
Value f_capitalize(const Value& v, CallArgs&) { return Value::string(py_capitalize(to_str(v))); }
Value f_trim(const Value& v, CallArgs& a) {
  return Value::string(py_strip(to_str(v), arg_or(a, 0, "chars", Value::none()), true, true));
}
Value f_pprint(const Value& v, CallArgs&) { return Value::string(repr(v)); }
Value f_list(const Value& v, CallArgs&) { return Value::make_list(iterate(v)); }

// jinja2's title(): words start after whitespace or one of - ( { [ <.
Value f_title(const Value& v, CallArgs&) {
  std::u32string c = utf8_decode(to_str(v));
  bool start = true;
  for (auto& ch : c) {
    bool sep =
        is_unicode_space(ch) || ch == '-' || ch == '(' || ch == '{' || ch == '[' || ch == '<';
    if (sep) {
      start = true;
      continue;
    }
    ch = start ? to_upper(ch) : to_lower(ch);
    start = false;
  }
  return Value::string(utf8_encode(c));
}

Value f_replace(const Value& v, CallArgs& a) {
  std::string old = to_str(arg_or(a, 0, "old", Value::string("")));
  std::string rep = to_str(arg_or(a, 1, "new", Value::string("")));
  Value count = arg_or(a, 2, "count", Value::none());
  return Value::string(py_replace(to_str(v), old, rep, count.is_none() ? -1 : count.as_int()));
}

Value f_default(const Value& v, CallArgs& a) {
  bool boolean = truthy(arg_or(a, 1, "boolean", Value::boolean(false)));
  if (v.is_undefined() || (boolean && !truthy(v)))
    return arg_or(a, 0, "default_value", Value::string(""));
  return v;
}

Value f_first(const Value& v, CallArgs&) {
  std::vector<Value> items = iterate(v);
  return items.empty() ? Value::undefined("first") : items.front();
}

Value f_last(const Value& v, CallArgs&) {
  std::vector<Value> items = iterate(v);
  return items.empty() ? Value::undefined("last") : items.back();
}

Value f_join(const Value& v, CallArgs& a) {
  std::string sep = to_str(arg_or(a, 0, "d", Value::string("")));
  const Value* attr = find_arg(a, 1, "attribute");
  std::string out;
  bool first = true;
  for (const Value& item : iterate(v)) {
    if (!first) out += sep;
    first = false;
    out += to_str(attr && !attr->is_none() ? lookup_path(item, *attr) : item);
  }
  return Value::string(out);
}

Value f_items(const Value& v, CallArgs&) {
  if (v.is_undefined()) return Value::make_list({});
  if (!v.is_dict()) fail("Can only get item pairs from a mapping, not {}", type_name(v));
  ValueList out;
  for (const auto& [k, x] : v.dict->items) out.push_back(Value::make_tuple({Value::string(k), x}));
  return Value::make_list(std::move(out));
}

Value f_dictsort(const Value& v, CallArgs& a) {
  Value items = f_items(v, a);
  bool cs = truthy(arg_or(a, 0, "case_sensitive", Value::boolean(false)));
  Value by = arg_or(a, 1, "by", Value::string("key"));
  bool rev = truthy(arg_or(a, 2, "reverse", Value::boolean(false)));
  size_t pos = by.is_string() && by.s == "value" ? 1 : 0;
  std::stable_sort(items.list->begin(), items.list->end(), [&](const Value& x, const Value& y) {
    int c = compare(sort_key((*x.list)[pos], cs), sort_key((*y.list)[pos], cs));
    return rev ? c > 0 : c < 0;
  });
  return items;
}

Value f_tojson(const Value& v, CallArgs& a) {
  JsonOptions o;
  o.ensure_ascii = truthy(arg_or(a, 0, "ensure_ascii", Value::boolean(false)));
  Value indent = arg_or(a, 1, "indent", Value::none());
  if (indent.is_integral()) {
    o.indent = static_cast<int>(indent.as_int());
  } else if (!indent.is_none()) {
    fail("tojson: indent must be an integer or None");
  }
  Value seps = arg_or(a, 2, "separators", Value::none());
  if (seps.is_list() && seps.list->size() == 2) {
    o.custom_separators = true;
    o.item_sep = to_str((*seps.list)[0]);
    o.key_sep = to_str((*seps.list)[1]);
  } else if (!seps.is_none()) {
    fail("tojson: separators must be a (item_separator, key_separator) pair");
  }
  o.sort_keys = truthy(arg_or(a, 3, "sort_keys", Value::boolean(false)));
  return Value::string(to_json(v, o));
}

// jinja2's int filter: int(value) or int(value, base) for strings, then int(float(value)),
// then the default.
Value f_int(const Value& v, CallArgs& a) {
  Value dflt = arg_or(a, 0, "default", Value::integer(0));
  int64_t base = int_arg(a, 1, "base", 10);
  if (v.is_integral()) return v.big ? v : Value::integer(v.as_int());
  int64_t i = 0;
  double d = 0;
  if (v.kind == Value::Kind::kFloat) {
    d = v.f;
  } else if (!v.is_string()) {
    return dflt;
  } else if (py_parse_int(v.s, base, i)) {
    return Value::integer(i);
  } else if (!py_parse_float(v.s, d)) {
    return dflt;
  }
  if (!std::isfinite(d)) return dflt;  // ValueError, OverflowError
  if (!float_to_int(d, i)) fail("int: {} is beyond 64 bits (not supported)", format_float(d));
  return Value::integer(i);
}

Value f_float(const Value& v, CallArgs& a) {
  Value dflt = arg_or(a, 0, "default", Value::number(0.0));
  if (v.is_number()) return Value::number(v.as_double());
  double d = 0;
  if (v.is_string() && py_parse_float(v.s, d)) return Value::number(d);
  return dflt;
}

Value f_abs(const Value& v, CallArgs&) {
  if (v.is_integral()) {
    if (v.big || v.as_int() == INT64_MIN) return v.as_big().neg ? unary_op("-", v) : v;
    return Value::integer(std::llabs(v.as_int()));
  }
  if (v.kind == Value::Kind::kFloat) return Value::number(std::fabs(v.f));
  fail("bad operand type for abs(): '{}'", type_name(v));
}

Value f_round(const Value& v, CallArgs& a) {
  int64_t precision = int_arg(a, 0, "precision", 0);
  std::string method = to_str(arg_or(a, 1, "method", Value::string("common")));
  if (!v.is_number()) fail("round: expected a number, got {}", type_name(v));
  if (method == "common" && v.is_integral()) {
    // Python rounds ints exactly, halves to even: round(15, -1) == 20.
    __int128 p = 1, x = v.as_int();
    for (int64_t k = std::max<int64_t>(precision, -20); k < 0; ++k) p *= 10;
    __int128 q = x / p - (x % p < 0), r = x - q * p;  // floor division
    q += 2 * r > p || (2 * r == p && q % 2 != 0);
    if (q * p > INT64_MAX || q * p < INT64_MIN) fail("round: integer overflow");
    return Value::integer(static_cast<int64_t>(q * p));
  }
  if (method == "common" && precision >= 0) {
    if (precision > 323) return Value::number(v.as_double());  // as Python: beyond any digit
    // Python rounds the exact binary value (round(2.675, 2) == 2.67: 2.675 is 2.67499...), as
    // to_chars does; scaling by 10**precision first would round 267.49999... up to 267.5.
    char buf[700];  // 309 integer digits, the point and 323 decimals
    const char* end = std::to_chars(buf, buf + sizeof buf, v.as_double(), std::chars_format::fixed,
                                    static_cast<int>(precision)).ptr;
    double rounded = 0;
    std::from_chars(buf, end, rounded);
    return Value::number(rounded);
  }
  if (method == "common") {
    // precision < 0: dividing by the exact 10**-precision rounds as Python does, but at ties;
    // an x whose ulp is 2 * 10**-precision or more is already as near as a double gets.
    const double p = std::pow(10.0, static_cast<double>(-precision)), x = v.as_double();
    if (std::isinf(p)) return Value::number(0.0 * x);
    return Value::number(std::fabs(x) >= 0x1p54 * p ? x : std::nearbyint(x / p) * p);
  }
  if (method != "floor" && method != "ceil")
    fail("round: method must be 'common', 'ceil' or 'floor'");
  // jinja2 scales by 10**precision; + 0.0 as math.floor/ceil return ints: ceil(-0.5) is 0.0.
  const double scale = std::pow(10.0, static_cast<double>(precision));
  const double x = v.as_double() * scale;
  return Value::number(((method == "floor" ? std::floor(x) : std::ceil(x)) + 0.0) / scale);
}

Value f_reverse(const Value& v, CallArgs&) {
  if (v.is_string()) {
    std::u32string c = utf8_decode(v.s);
    std::reverse(c.begin(), c.end());
    return Value::string(utf8_encode(c));
  }
  std::vector<Value> items = iterate(v);
  std::reverse(items.begin(), items.end());
  return Value::make_list(std::move(items));
}

// map/select/reject/selectattr/rejectattr guard with `if value:` in jinja2, so a falsy input
// (none, 0, false) gives an empty result instead of a type error.
std::vector<Value> lazy_items(const Value& v) {
  return truthy(v) ? iterate(v) : std::vector<Value>{};
}

Value f_map(const Value& v, CallArgs& a) {
  ValueList out;
  if (const Value* attr = find_arg(a, SIZE_MAX, "attribute")) {
    Value dflt = arg_or(a, SIZE_MAX, "default", Value::undefined());
    for (const Value& item : lazy_items(v)) {
      Value x = lookup_path(item, *attr);
      out.push_back(x.is_undefined() && !dflt.is_undefined() ? dflt : x);
    }
    return Value::make_list(std::move(out));
  }
  if (a.pos.empty() || !a.pos[0].is_string()) fail("map: expected a filter name or attribute=");
  std::string name = a.pos[0].s;
  if (!has_filter(name)) fail("map: no filter named '{}'", name);
  CallArgs rest;
  rest.pos.assign(a.pos.begin() + 1, a.pos.end());
  rest.kw = a.kw;
  for (const Value& item : lazy_items(v)) out.push_back(apply_filter(name, item, rest));
  return Value::make_list(std::move(out));
}

// select/reject/selectattr/rejectattr share this: the test (or truthiness) on item or attribute.
Value select_impl(const Value& v, CallArgs& a, bool with_attr, bool keep) {
  size_t first = with_attr ? 1 : 0;
  Value attr = with_attr ? arg_or(a, 0, "attribute", Value::none()) : Value::none();
  std::string test;
  if (a.pos.size() > first) test = to_str(a.pos[first]);
  if (!test.empty() && !has_test(test)) fail("no test named '{}'", test);
  CallArgs targs;
  if (a.pos.size() > first + 1) targs.pos.assign(a.pos.begin() + first + 1, a.pos.end());
  ValueList out;
  for (const Value& item : lazy_items(v)) {
    Value x = with_attr ? lookup_path(item, attr) : item;
    bool ok = test.empty() ? truthy(x) : apply_test(test, x, targs);
    if (ok == keep) out.push_back(item);
  }
  return Value::make_list(std::move(out));
}
Value f_select(const Value& v, CallArgs& a) { return select_impl(v, a, false, true); }
Value f_reject(const Value& v, CallArgs& a) { return select_impl(v, a, false, false); }
Value f_selectattr(const Value& v, CallArgs& a) { return select_impl(v, a, true, true); }
Value f_rejectattr(const Value& v, CallArgs& a) { return select_impl(v, a, true, false); }

Value f_unique(const Value& v, CallArgs& a) {
  bool cs = truthy(arg_or(a, 0, "case_sensitive", Value::boolean(false)));
  Value attr = arg_or(a, 1, "attribute", Value::none());
  ValueList out, seen;
  for (const Value& item : iterate(v)) {
    Value key = sort_key(attr.is_none() ? item : lookup_path(item, attr), cs);
    if (std::any_of(seen.begin(), seen.end(), [&](const Value& s) { return equals(s, key); }))
      continue;
    seen.push_back(key);
    out.push_back(item);
  }
  return Value::make_list(std::move(out));
}

Value f_sort(const Value& v, CallArgs& a) {
  bool rev = truthy(arg_or(a, 0, "reverse", Value::boolean(false)));
  bool cs = truthy(arg_or(a, 1, "case_sensitive", Value::boolean(false)));
  Value attr = arg_or(a, 2, "attribute", Value::none());
  // jinja2's make_multi_attrgetter: "a,b.c" sorts by a, then b.c. Keys are compared as Python
  // compares the lists it builds: equal items (two undefined, two none) are skipped, not ordered.
  std::vector<Value> paths;
  if (attr.is_string()) {
    for (size_t b = 0;;) {
      const size_t e = attr.s.find(',', b);
      paths.push_back(Value::string(attr.s.substr(b, e == std::string::npos ? std::string::npos : e - b)));
      if (e == std::string::npos) break;
      b = e + 1;
    }
  } else if (!attr.is_none()) {
    paths.push_back(attr);
  }
  auto key = [&](const Value& item) {
    ValueList k;
    if (paths.empty()) k.push_back(sort_key(item, cs));
    for (const Value& p : paths) k.push_back(sort_key(lookup_path(item, p), cs));
    return Value::make_list(std::move(k));
  };
  std::vector<Value> items = iterate(v), keys;
  keys.reserve(items.size());
  for (const Value& item : items) keys.push_back(key(item));
  std::vector<size_t> order(items.size());
  for (size_t k = 0; k < order.size(); ++k) order[k] = k;
  std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) {
    const int c = compare(keys[x], keys[y]);
    return rev ? c > 0 : c < 0;
  });
  ValueList out;
  out.reserve(items.size());
  for (size_t k : order) out.push_back(items[k]);
  return Value::make_list(std::move(out));
}

Value minmax(const Value& v, CallArgs& a, bool want_max) {
  bool cs = truthy(arg_or(a, 0, "case_sensitive", Value::boolean(false)));
  Value attr = arg_or(a, 1, "attribute", Value::none());
  std::vector<Value> items = iterate(v);
  if (items.empty()) return Value::undefined(want_max ? "max" : "min");
  size_t best = 0;
  for (size_t k = 1; k < items.size(); ++k) {
    Value kb = sort_key(attr.is_none() ? items[best] : lookup_path(items[best], attr), cs);
    Value kk = sort_key(attr.is_none() ? items[k] : lookup_path(items[k], attr), cs);
    if (ordered(want_max ? ">" : "<", kk, kb)) best = k;  // as Python's max(): item > best
  }
  return items[best];
}
Value f_min(const Value& v, CallArgs& a) { return minmax(v, a, false); }
Value f_max(const Value& v, CallArgs& a) { return minmax(v, a, true); }

Value f_sum(const Value& v, CallArgs& a) {
  Value attr = arg_or(a, 0, "attribute", Value::none());
  Value total = arg_or(a, 1, "start", Value::integer(0));
  for (const Value& item : iterate(v)) {
    Value x = attr.is_none() ? item : lookup_path(item, attr);
    if (!x.is_number() || !total.is_number())
      fail("sum: unsupported operand types {} and {}", type_name(total), type_name(x));
    total = binary_op("+", total, x);  // exact past 64 bits, as Python's sum
  }
  return total;
}

Value f_escape(const Value& v, CallArgs&) {
  std::string out;
  for (char c : to_str(v)) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&#34;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return Value::string(out);
}

Value f_indent(const Value& v, CallArgs& a) {
  Value w = arg_or(a, 0, "width", Value::integer(4));
  std::string ind =
      w.is_string() ? w.s : std::string(static_cast<size_t>(std::max<int64_t>(0, w.as_int())), ' ');
  bool first = truthy(arg_or(a, 1, "first", Value::boolean(false)));
  bool blank = truthy(arg_or(a, 2, "blank", Value::boolean(false)));
  if (!v.is_string()) fail("indent: expected a string, got {}", type_name(v));
  std::string s = v.s + "\n";
  std::vector<std::string> lines;
  size_t b = 0;
  for (size_t e; (e = s.find('\n', b)) != std::string::npos; b = e + 1)
    lines.push_back(s.substr(b, e - b));
  std::string out = first ? ind : "";
  out += lines[0];
  for (size_t k = 1; k < lines.size(); ++k) {
    out += '\n';
    if (blank || !lines[k].empty()) out += ind;
    out += lines[k];
  }
  return Value::string(out);
}

Value f_center(const Value& v, CallArgs& a) {
  std::string s = to_str(v);
  int64_t width = int_arg(a, 0, "width", 80);
  int64_t len = static_cast<int64_t>(utf8_decode(s).size());
  if (width <= len) return Value::string(s);
  int64_t pad = width - len, left = pad / 2 + (pad & width & 1);
  std::string out(static_cast<size_t>(left), ' ');
  out += s;
  out.append(static_cast<size_t>(pad - left), ' ');
  return Value::string(out);
}

Value f_wordcount(const Value& v, CallArgs&) {
  int64_t n = 0;
  bool in_word = false;
  for (char32_t c : utf8_decode(to_str(v))) {
    bool w = c == '_' || (c >= '0' && c <= '9') || is_cased_letter(c) || c > 0x2e7f;
    if (w && !in_word) ++n;
    in_word = w;
  }
  return Value::integer(n);
}

Value f_attr(const Value& v, CallArgs& a) {
  std::string name = to_str(arg_or(a, 0, "name", Value::string("")));
  if (v.is_dict())
    return Value::undefined(name);  // attr() skips item lookup: dict keys are not attributes
  return get_attr(v, name);
}

const std::unordered_map<std::string_view, FilterFn>& filters() {
  static const std::unordered_map<std::string_view, FilterFn> kFilters = {
      {"abs", f_abs},
      {"attr", f_attr},
      {"batch", batch_filter},
      {"capitalize", f_capitalize},
      {"center", f_center},
      {"count", f_length},
      {"d", f_default},
      {"default", f_default},
      {"dictsort", f_dictsort},
      {"e", f_escape},
      {"escape", f_escape},
      {"first", f_first},
      {"float", f_float},
      {"forceescape", f_escape},
      {"format", printf_format},
      {"groupby", groupby_filter},
      {"indent", f_indent},
      {"int", f_int},
      {"items", f_items},
      {"join", f_join},
      {"last", f_last},
      {"length", f_length},
      {"list", f_list},
      {"lower", f_lower},
      {"map", f_map},
      {"max", f_max},
      {"min", f_min},
      {"pprint", f_pprint},
      {"reject", f_reject},
      {"rejectattr", f_rejectattr},
      {"replace", f_replace},
      {"reverse", f_reverse},
      {"round", f_round},
      {"safe", f_safe},
      {"select", f_select},
      {"selectattr", f_selectattr},
      {"slice", slice_filter},
      {"sort", f_sort},
      {"string", f_string},
      {"sum", f_sum},
      {"title", f_title},
      {"tojson", f_tojson},
      {"trim", f_trim},
      {"truncate", truncate_filter},
      {"unique", f_unique},
      {"upper", f_upper},
      {"wordcount", f_wordcount},
  };
  return kFilters;
}

}  // namespace

Value lookup_path(const Value& v, const Value& attr) {
  if (attr.is_integral()) return get_item(v, attr);
  if (!attr.is_string()) fail("attribute must be a string or an integer");
  Value cur = v;
  size_t b = 0;
  const std::string& path = attr.s;
  while (true) {
    size_t e = path.find('.', b);
    std::string part = path.substr(b, e == std::string::npos ? std::string::npos : e - b);
    if (int64_t index; decimal_index(part, index))
      cur = index < 0 ? Value::undefined() : get_item(cur, Value::integer(index));  // < 0: past 64 bits
    else if (all_cps(part, is_unicode_digit))  // str.isdigit() but not int(): jinja2's int(part) raises
      fail("invalid literal for int() with base 10: '{}'", part);
    else
      cur = get_item(cur, Value::string(part));
    if (e == std::string::npos) return cur;
    b = e + 1;
  }
}

bool has_filter(std::string_view name) { return filters().count(name) != 0; }

Value apply_filter(const std::string& name, const Value& input, CallArgs& args) {
  auto it = filters().find(name);
  if (it == filters().end()) fail("no filter named '{}'", name);
  return it->second(input, args);
}

}  // namespace lite_llama::jinja

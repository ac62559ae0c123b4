// Built-in filters, tests, globals, operators and Python methods available to chat templates,
// matching what transformers' ImmutableSandboxedEnvironment exposes (jinja2 builtins plus its
// tojson override, raise_exception and strftime_now). Errors are thrown as lite_llama::Error
// without a location; the renderer adds the template line.
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "template/jinja_value.h"

namespace lite_llama::jinja {

bool has_filter(std::string_view name);
bool has_test(std::string_view name);
Value apply_filter(const std::string& name, const Value& input, CallArgs& args);
bool apply_test(const std::string& name, const Value& v, CallArgs& args);

// jinja2's environment.getattr / getitem: `obj.name` prefers Python attributes (bound methods
// such as dict.items) over keys, `obj[key]` prefers keys; misses give Undefined.
Value get_attr(const Value& obj, const std::string& name);
Value get_item(const Value& obj, const Value& key);
Value get_slice(const Value& obj, const Value& start, const Value& stop, const Value& step);

// Elements a `for` loop or a filter sees: list items, dict keys, string characters.
std::vector<Value> iterate(const Value& v);
size_t py_len(const Value& v);
bool contains(const Value& container, const Value& item);  // `item in container`

// Python's operators (jinja_operators.cpp). `and`/`or` are not here: they short-circuit, so the
// renderer evaluates them. An Undefined operand fails, naming the missing variable.
[[noreturn]] void undefined_error(const Value& v);
bool compare_op(const std::string& op, const Value& l, const Value& r);  // ==, <, in, notin ...
Value unary_op(const std::string& op, const Value& v);                   // not, +, -
Value binary_op(const std::string& op, const Value& l, const Value& r);  // ~, +, //, %, ** ...

// jinja2's make_attrgetter: "a.b.0" looks up item-first at each step (jinja_filters.cpp).
Value lookup_path(const Value& v, const Value& attr);

// Filters of jinja_more_filters.cpp.
Value groupby_filter(const Value& v, CallArgs& a);
Value batch_filter(const Value& v, CallArgs& a);
Value slice_filter(const Value& v, CallArgs& a);
Value truncate_filter(const Value& v, CallArgs& a);

// Python's `str % args` (jinja2's format filter; jinja_format.cpp).
Value printf_format(const Value& fmt, CallArgs& args);

// Python's str.format with format specs (jinja_str_format.cpp).
std::string py_str_format(const std::string& fmt, const CallArgs& args);
// |n| in `base` (2 to 16), lower-case digits unless `upper` (jinja_format.cpp): both formats' digits.
std::string int_digits(int64_t n, unsigned base, bool upper);

// int(s, base) / float(s) of a string as Python parses them (jinja_format.cpp); false where
// Python raises ValueError.
bool py_parse_int(const std::string& s, int64_t base, int64_t& out);
bool py_parse_float(const std::string& s, double& out);

// int(x) for floats: truncation; false where x is out of range or not finite.
inline bool float_to_int(double d, int64_t& out) {
  if (!(d >= -9223372036854775808.0 && d < 9223372036854775808.0)) return false;
  out = static_cast<int64_t>(d);
  return true;
}

// Globals of transformers' chat template environment.
void add_globals(Dict& globals);

// Argument helpers shared by filters and methods: positional index `pos`, else keyword `name`.
const Value* find_arg(const CallArgs& args, size_t pos, std::string_view name);
Value arg_or(const CallArgs& args, size_t pos, std::string_view name, Value fallback);

// Bound methods: `"s".split(...)`, `d.get(...)`, `l.index(...)` (read-only ones only).
bool has_method(const Value& obj, const std::string& name);
Value call_method(const Value& obj, const std::string& name, CallArgs& args);
const std::string& need_str(const Value& v, const char* what);  // throws unless v is a string

// Python str methods used directly by filters.
std::string py_strip(const std::string& s, const Value& chars, bool left, bool right);
std::string py_lower(const std::string& s);
std::string py_upper(const std::string& s);
std::string py_capitalize(const std::string& s);
std::string py_replace(const std::string& s, const std::string& old, const std::string& rep,
                       int64_t count);
// Whether s is all decimal digits of any script, as int() reads them (an index in attribute
// paths and str.format fields); `index` is its value, or -1 past 64 bits (an index no item has).
bool decimal_index(std::string_view s, int64_t& index);
// Whether s has code points and pred holds for each (str.isdigit(), str.isspace(), ...).
bool all_cps(std::string_view s, bool (*pred)(char32_t));

}  // namespace lite_llama::jinja

// jinja2's built-in tests (`x is defined`, `x is string`, `n is divisibleby 3` ...) as the
// ImmutableSandboxedEnvironment of transformers provides them.
#include <string_view>
#include <unordered_map>

#include "core/error.h"
#include "template/jinja_builtins.h"

namespace lite_llama::jinja {

namespace {

using TestFn = bool (*)(const Value&, CallArgs&);

bool t_defined(const Value& v, CallArgs&) { return !v.is_undefined(); }
bool t_undefined(const Value& v, CallArgs&) { return v.is_undefined(); }
bool t_none(const Value& v, CallArgs&) { return v.is_none(); }
bool t_boolean(const Value& v, CallArgs&) { return v.kind == Value::Kind::kBool; }
bool t_true(const Value& v, CallArgs&) { return v.kind == Value::Kind::kBool && v.b; }
bool t_false(const Value& v, CallArgs&) { return v.kind == Value::Kind::kBool && !v.b; }
bool t_integer(const Value& v, CallArgs&) { return v.kind == Value::Kind::kInt; }
bool t_float(const Value& v, CallArgs&) { return v.kind == Value::Kind::kFloat; }
bool t_number(const Value& v, CallArgs&) { return v.is_number(); }
bool t_string(const Value& v, CallArgs&) { return v.is_string(); }
bool t_mapping(const Value& v, CallArgs&) { return v.is_dict(); }
bool t_callable(const Value& v, CallArgs&) { return v.kind == Value::Kind::kFunction; }
// Undefined is iterable (and a "sequence") in jinja2: it iterates as empty and has a length.
bool t_iterable(const Value& v, CallArgs&) {
  return v.is_undefined() || v.is_string() || v.is_list() || v.is_dict();
}
bool t_sequence(const Value& v, CallArgs& a) { return t_iterable(v, a); }
// str(value).islower() / isupper(): a cased character is needed ('' and '1' are neither).
bool t_lower(const Value& v, CallArgs&) {
  std::string s = to_str(v);
  return py_lower(s) == s && py_upper(s) != s;
}
bool t_upper(const Value& v, CallArgs&) {
  std::string s = to_str(v);
  return py_upper(s) == s && py_lower(s) != s;
}
bool t_escaped(const Value&, CallArgs&) { return false; }
const Value& other(const CallArgs& a) {
  if (a.pos.empty()) fail("test needs an argument to compare with");
  return a.pos[0];
}
int64_t need_int(const Value& v) {
  if (!v.is_integral()) fail("expected an integer, got {}", type_name(v));
  return v.as_int();
}
bool t_odd(const Value& v, CallArgs&) { return need_int(v) % 2 != 0; }
bool t_even(const Value& v, CallArgs&) { return need_int(v) % 2 == 0; }
bool t_divisibleby(const Value& v, CallArgs& a) {
  int64_t d = need_int(other(a));
  if (d == 0) fail("integer division or modulo by zero");
  return need_int(v) % d == 0;
}
bool t_eq(const Value& v, CallArgs& a) { return equals(v, other(a)); }
bool t_ne(const Value& v, CallArgs& a) { return !equals(v, other(a)); }
bool t_lt(const Value& v, CallArgs& a) { return ordered("<", v, other(a)); }
bool t_le(const Value& v, CallArgs& a) { return ordered("<=", v, other(a)); }
bool t_gt(const Value& v, CallArgs& a) { return ordered(">", v, other(a)); }
bool t_ge(const Value& v, CallArgs& a) { return ordered(">=", v, other(a)); }
bool t_in(const Value& v, CallArgs& a) { return contains(other(a), v); }
bool t_sameas(const Value& v, CallArgs& a) {
  const Value& o = other(a);
  if (v.kind != o.kind) return false;
  if (v.is_list()) return v.list == o.list;
  if (v.is_dict() || v.kind == Value::Kind::kNamespace) return v.dict == o.dict;
  return equals(v, o);
}
bool t_filter(const Value& v, CallArgs&) { return v.is_string() && has_filter(v.s); }
bool t_test(const Value& v, CallArgs&) { return v.is_string() && has_test(v.s); }

const std::unordered_map<std::string_view, TestFn>& tests() {
  static const std::unordered_map<std::string_view, TestFn> kTests = {
      {"defined", t_defined},
      {"undefined", t_undefined},
      {"none", t_none},
      {"boolean", t_boolean},
      {"true", t_true},
      {"false", t_false},
      {"integer", t_integer},
      {"float", t_float},
      {"number", t_number},
      {"string", t_string},
      {"mapping", t_mapping},
      {"iterable", t_iterable},
      {"sequence", t_sequence},
      {"callable", t_callable},
      {"lower", t_lower},
      {"upper", t_upper},
      {"escaped", t_escaped},
      {"odd", t_odd},
      {"even", t_even},
      {"divisibleby", t_divisibleby},
      {"eq", t_eq},
      {"equalto", t_eq},
      {"==", t_eq},
      {"ne", t_ne},
      {"!=", t_ne},
      {"lt", t_lt},
      {"lessthan", t_lt},
      {"<", t_lt},
      {"le", t_le},
      {"<=", t_le},
      {"gt", t_gt},
      {"greaterthan", t_gt},
      {">", t_gt},
      {"ge", t_ge},
      {">=", t_ge},
      {"in", t_in},
      {"sameas", t_sameas},
      {"filter", t_filter},
      {"test", t_test},
  };
  return kTests;
}

}  // namespace

bool has_test(std::string_view name) { return tests().count(name) != 0; }

bool apply_test(const std::string& name, const Value& v, CallArgs& args) {
  auto it = tests().find(name);
  if (it == tests().end()) fail("no test named '{}'", name);
  return it->second(v, args);
}

}  // namespace lite_llama::jinja

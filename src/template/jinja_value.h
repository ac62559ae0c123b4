// Values of the Jinja-subset chat template engine. They follow Python's data model closely
// (str/int/float/bool/None/list/dict plus Jinja's Undefined), because chat templates are written
// against Python semantics and the rendered prompt must match transformers byte for byte:
// printing, truthiness, equality and json.dumps all mimic CPython.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace lite_llama::jinja {

struct Value;
struct Dict;
struct BigInt;
struct PyRange;
[[noreturn]] void big_int_error();        // a >64-bit int where only 64-bit ones are supported
double big_to_double(const BigInt& v);
using ValueList = std::vector<Value>;

// Arguments of a call: positional then keyword (names kept in call order).
struct CallArgs {
  std::vector<Value> pos;
  std::vector<std::pair<std::string, Value>> kw;
};
using NativeFn = std::function<Value(CallArgs&)>;

struct Value {
  enum class Kind : uint8_t {
    kUndefined,
    kNone,
    kBool,
    kInt,
    kFloat,
    kString,
    kList,
    kDict,
    kNamespace,  // jinja2 namespace(): the one mutable object templates may write to
    kFunction,
  };
  Kind kind = Kind::kUndefined;
  bool is_tuple = false;  // a list that Python would hold as a tuple: only repr() differs
  bool is_group = false;  // a groupby() item: a (grouper, list) tuple with those attributes
  bool b = false;
  int64_t i = 0;
  double f = 0.0;
  std::string
      s;  // string payload; for Undefined the name that was missing, for functions their name
  std::shared_ptr<ValueList> list;
  std::shared_ptr<Dict> dict;  // dict and namespace
  std::shared_ptr<NativeFn> fn;
  std::shared_ptr<const BigInt> big;  // set for ints outside int64 (then i is unused)
  std::shared_ptr<const PyRange> range;  // set for a range(): a list Python prints and compares apart

  static Value undefined(std::string hint = {});
  static Value none();
  static Value boolean(bool v);
  static Value integer(int64_t v);
  static Value integer(BigInt v);  // stays a plain int64 when the value fits
  static Value number(double v);
  static Value string(std::string v);
  static Value make_list(ValueList items);
  static Value make_tuple(ValueList items);
  static Value make_range(ValueList items, Value start, Value stop, Value step);
  static Value make_dict(Dict d);
  static Value make_namespace(Dict d);
  static Value function(std::string name, NativeFn fn);

  bool is_undefined() const { return kind == Kind::kUndefined; }
  bool is_none() const { return kind == Kind::kNone; }
  bool is_string() const { return kind == Kind::kString; }
  bool is_list() const { return kind == Kind::kList; }
  bool is_dict() const { return kind == Kind::kDict; }
  // Python numbers include bool (bool is a subclass of int).
  bool is_number() const {
    return kind == Kind::kInt || kind == Kind::kFloat || kind == Kind::kBool;
  }
  bool is_integral() const { return kind == Kind::kInt || kind == Kind::kBool; }
  int64_t as_int() const {
    if (big) big_int_error();
    return kind == Kind::kBool ? (b ? 1 : 0) : i;
  }
  double as_double() const {
    return kind == Kind::kFloat ? f : big ? big_to_double(*big) : static_cast<double>(as_int());
  }
  BigInt as_big() const;  // any integral value, exactly
};

// range(start, stop, step): its items are materialized in the Value's list (the sandbox caps
// them); Python's own bounds are kept for repr, the attributes and slicing.
struct PyRange {
  Value start, stop, step;
};

// Insertion-ordered string-keyed map, like a Python dict built from JSON.
struct Dict {
  std::vector<std::pair<std::string, Value>> items;
  const Value* find(std::string_view key) const;
  Value* find(std::string_view key);
  void set(const std::string& key, Value v);
};

Value from_json(const nlohmann::ordered_json& j);
Value from_json(const nlohmann::json& j);
Value from_json(nlohmann::ordered_json&& j);  // moves its strings out

bool truthy(const Value& v);
std::string type_name(const Value& v);  // Python's type names, for error messages
std::string to_str(const Value& v);     // str(v)
std::string repr(const Value& v);       // repr(v)
std::string format_float(double d);     // float.__repr__

struct JsonOptions {
  int indent = -1;  // < 0: single line
  bool custom_separators =
      false;  // else Python's defaults: (", ", ": ") or ("," , ": ") with indent
  std::string item_sep;
  std::string key_sep;
  bool ensure_ascii = false;
  bool sort_keys = false;
};
// json.dumps(v, ...).
std::string to_json(const Value& v, JsonOptions opt);

bool equals(const Value& a, const Value& b);
// <0, 0, >0 like Python's ordering, for sorting (jinja_operators.cpp); throws lite_llama::Error
// where Python raises TypeError, naming `op` as Python names the operator that failed.
int compare(const Value& a, const Value& b, std::string_view op = "<");
// Python's `a op b` for op <, <=, >, >= (jinja_operators.cpp): as compare, but a NaN makes
// every op false, also inside sequences, where the first unequal items decide under op.
bool ordered(std::string_view op, const Value& a, const Value& b);

// UTF-8 helpers: Python indexes strings by code point.
std::u32string utf8_decode(std::string_view s);
std::string utf8_encode(std::u32string_view s);
void utf8_append(std::string& out, char32_t c);
bool is_unicode_space(char32_t c);  // str.isspace()
int decimal_digit(char32_t c);      // str.isdecimal(): the digit's value 0-9; -1 for any other
bool is_unicode_digit(char32_t c);  // str.isdigit(): decimal digits, superscripts, circled digits, ...
char32_t to_lower(char32_t c);
char32_t to_upper(char32_t c);
bool is_cased_letter(char32_t c);

}  // namespace lite_llama::jinja

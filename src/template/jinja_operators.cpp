// Python's operators on template values: comparisons, unary and binary arithmetic with Python's
// int/float rules (floor division, sign of %, ** by squaring), sequence concatenation and
// repetition, and str % args. Ints that overflow 64 bits continue exactly as big ints.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string_view>

#include "core/error.h"
#include "template/jinja_bigint.h"
#include "template/jinja_builtins.h"

namespace lite_llama::jinja {

namespace {

Value repeat(const Value& v, int64_t n) {
  size_t unit = v.is_string() ? v.s.size() : v.list->size();
  if (n > 0 && unit > 0 && static_cast<uint64_t>(n) > (size_t{1} << 28) / unit)
    fail("sequence repetition result too large");
  if (v.is_string()) {
    std::string out;
    for (int64_t k = 0; k < n; ++k) out += v.s;
    return Value::string(out);
  }
  ValueList items;
  for (int64_t k = 0; k < n; ++k) items.insert(items.end(), v.list->begin(), v.list->end());
  return v.is_tuple ? Value::make_tuple(std::move(items)) : Value::make_list(std::move(items));
}

Value arithmetic(const std::string& op, const Value& l, const Value& r) {
  auto type_error = [&]() -> Value {
    if (op == "+" && l.is_string())
      fail("can only concatenate str (not \"{}\") to str", type_name(r));
    if (op == "+" && l.is_list() && !l.range)
      fail("can only concatenate {0} (not \"{1}\") to {0}", type_name(l), type_name(r));
    fail("unsupported operand type(s) for {}: '{}' and '{}'", op, type_name(l), type_name(r));
  };
  if (l.is_number() && r.is_number()) {
    bool ints = l.is_integral() && r.is_integral();
    // Python ints never overflow: past 64 bits (or with a big operand) take the exact path.
    if (ints && (l.big || r.big) && op != "/") {
      if (op == "**" && r.big && r.big->neg) return Value::number(std::pow(l.as_double(), r.as_double()));
      return big_arithmetic(op, l, r);
    }
    const bool small = ints && !l.big && !r.big;  // big ones reach here only for "/"
    int64_t a = small ? l.as_int() : 0, b = small ? r.as_int() : 0;
    double x = l.as_double(), y = r.as_double();
    int64_t res = 0;
    auto checked = [&](bool overflow) {
      return overflow ? big_arithmetic(op, l, r) : Value::integer(res);
    };
    if (op == "+") return ints ? checked(__builtin_add_overflow(a, b, &res)) : Value::number(x + y);
    if (op == "-") return ints ? checked(__builtin_sub_overflow(a, b, &res)) : Value::number(x - y);
    if (op == "*") return ints ? checked(__builtin_mul_overflow(a, b, &res)) : Value::number(x * y);
    if (op == "/") {
      if (y == 0) fail("division by zero");
      return Value::number(x / y);
    }
    if (op == "//" || op == "%") {
      if (y == 0) fail("integer division or modulo by zero");
      if (ints) {
        if (a == INT64_MIN && b == -1) return big_arithmetic(op, l, r);
        int64_t q = a / b, m = a % b;
        if (m != 0 && ((m < 0) != (b < 0))) {  // Python floors toward negative infinity
          --q;
          m += b;
        }
        return op == "//" ? Value::integer(q) : Value::integer(m);
      }
      double q = std::floor(x / y);
      return op == "//" ? Value::number(q) : Value::number(x - q * y);
    }
    if (op == "**") {
      if (ints && b >= 0) {
        res = 1;
        int64_t base = a;
        for (int64_t e = b; e > 0; e >>= 1) {  // square-and-multiply, overflow-checked
          if ((e & 1) && __builtin_mul_overflow(res, base, &res)) return big_arithmetic(op, l, r);
          if (e > 1 && __builtin_mul_overflow(base, base, &base)) return big_arithmetic(op, l, r);
        }
        return Value::integer(res);
      }
      return Value::number(std::pow(x, y));
    }
    return type_error();
  }
  if (op == "+" && l.is_string() && r.is_string()) return Value::string(l.s + r.s);
  // A range is no list: Python neither concatenates nor repeats it.
  if (op == "+" && l.is_list() && r.is_list() && l.is_tuple == r.is_tuple && !l.range && !r.range) {
    ValueList items = *l.list;
    items.insert(items.end(), r.list->begin(), r.list->end());
    return l.is_tuple ? Value::make_tuple(std::move(items)) : Value::make_list(std::move(items));
  }
  if (op == "*" && (l.is_string() || (l.is_list() && !l.range)) && r.is_integral()) return repeat(l, r.as_int());
  if (op == "*" && (r.is_string() || (r.is_list() && !r.range)) && l.is_integral()) return repeat(r, l.as_int());
  if (op == "%" && l.is_string()) {  // printf-style formatting, as Python's str % args
    CallArgs args;
    if (r.is_list() && r.is_tuple) {
      args.pos = *r.list;
    } else {
      args.pos.push_back(r);  // a dict serves %(key)s fields and plain %s alike
      if (r.is_dict())
        for (const auto& [k, v] : r.dict->items) args.kw.emplace_back(k, v);
    }
    return apply_filter("format", l, args);
  }
  return type_error();
}

// Python orders a list only against a list and a tuple against a tuple (a range not at all).
bool same_sequence_kind(const Value& a, const Value& b) {
  return a.is_list() && b.is_list() && a.is_tuple == b.is_tuple && !a.range && !b.range;
}

bool is_nan(const Value& v) { return v.kind == Value::Kind::kFloat && std::isnan(v.f); }

}  // namespace

int compare(const Value& a, const Value& b, std::string_view op) {
  if (a.is_number() && b.is_number()) {
    if (a.big || b.big) return big_compare(a, b);
    if (a.is_integral() && b.is_integral())
      return a.as_int() < b.as_int() ? -1 : (a.as_int() > b.as_int() ? 1 : 0);
    double x = a.as_double(), y = b.as_double();
    return x < y ? -1 : (x > y ? 1 : 0);
  }
  if (a.is_string() && b.is_string()) return a.s < b.s ? -1 : (a.s > b.s ? 1 : 0);
  if (same_sequence_kind(a, b)) {
    size_t n = std::min(a.list->size(), b.list->size());
    for (size_t k = 0; k < n; ++k) {
      if (!equals((*a.list)[k], (*b.list)[k])) return compare((*a.list)[k], (*b.list)[k], op);
    }
    return a.list->size() < b.list->size() ? -1 : (a.list->size() > b.list->size() ? 1 : 0);
  }
  // jinja2's Undefined raises its own error from every ordering method, on either side.
  if (a.is_undefined()) undefined_error(a);
  if (b.is_undefined()) undefined_error(b);
  fail("'{}' not supported between instances of '{}' and '{}'", op, type_name(a), type_name(b));
}

bool ordered(std::string_view op, const Value& a, const Value& b) {
  if (a.is_number() && b.is_number() && (is_nan(a) || is_nan(b))) return false;
  if (same_sequence_kind(a, b)) {  // the first unequal items decide under op itself (a NaN there too)
    size_t n = std::min(a.list->size(), b.list->size());
    for (size_t k = 0; k < n; ++k)
      if (!equals((*a.list)[k], (*b.list)[k])) return ordered(op, (*a.list)[k], (*b.list)[k]);
  }
  const int c = compare(a, b, op);
  return op == "<" ? c < 0 : op == "<=" ? c <= 0 : op == ">" ? c > 0 : c >= 0;
}

void undefined_error(const Value& v) {
  if (v.s.empty()) fail("an undefined value was used in an operation");
  fail("'{}' is undefined", v.s);
}

bool compare_op(const std::string& op, const Value& l, const Value& r) {
  if (op == "==") return equals(l, r);
  if (op == "!=") return !equals(l, r);
  if (op == "in") return contains(r, l);
  if (op == "notin") return !contains(r, l);
  return ordered(op, l, r);
}

Value unary_op(const std::string& op, const Value& v) {
  if (op == "not") return Value::boolean(!truthy(v));
  if (v.is_undefined()) undefined_error(v);
  if (!v.is_number()) fail("bad operand type for unary {}: '{}'", op, type_name(v));
  if (op == "+") return v.kind == Value::Kind::kBool ? Value::integer(v.as_int()) : v;
  if (v.kind == Value::Kind::kFloat) return Value::number(-v.f);
  if (v.big || v.as_int() == INT64_MIN) return big_arithmetic("-", Value::integer(0), v);
  return Value::integer(-v.as_int());
}

Value binary_op(const std::string& op, const Value& l, const Value& r) {
  if (op == "~") return Value::string(to_str(l) + to_str(r));
  if (l.is_undefined()) undefined_error(l);
  if (r.is_undefined()) undefined_error(r);
  return arithmetic(op, l, r);
}

}  // namespace lite_llama::jinja

// The keywords of string, integer and number schemas for the JSON Schema compiler
// (json_schema.cpp): read and checked here, written as GBNF with json_strings.h / json_numbers.h.
#include "grammar/json_schema_scalars.h"

#include <cmath>
#include <optional>

#include "core/error.h"
#include "grammar/gbnf_parser.h"
#include "grammar/json_numbers.h"
#include "grammar/json_strings.h"
#include "grammar/regex_to_gbnf.h"

namespace lite_llama::grammar {

using json = nlohmann::ordered_json;

namespace {

constexpr int64_t kIntLimit = kJsonIntLimit;
constexpr int64_t kMaxEnumerated = 256;  // multipleOf with bounds: at most this many values listed

[[noreturn]] void error(const std::string& msg) { fail("json schema: {}", msg); }

std::string lit(const std::string& s) {
  std::string out(1, '"');
  out.append(gbnf_escape(s)).push_back('"');
  return out;
}

// A string of a supported format. Lengths are kept only where every string of the format
// already fits them (a uuid with maxLength 36): cutting the format's grammar to a length is
// not supported.
std::string format_schema(const json& s) {
  const std::string f = s["format"].is_string() ? s["format"].get<std::string>() : "";
  const StringFormat* format = string_format(f);
  if (!format) error("unsupported string format '" + s["format"].dump() + "'");
  const int64_t lo = schema_count(s, "minLength", 0), hi = schema_count(s, "maxLength", -1);
  if (lo > format->shortest || (hi >= 0 && (format->longest < 0 || hi < format->longest)))
    error("'format' with 'minLength' / 'maxLength' is not supported (unless every '" + f + "' string fits them: " +
          std::to_string(format->shortest) +
          (format->longest < 0 ? " characters or more)" : " to " + std::to_string(format->longest) + " characters)"));
  return "\"\\\"\" " + format->body + " \"\\\"\"";
}

}  // namespace

int64_t schema_count(const json& s, const char* key, int64_t dflt) {
  if (!s.contains(key)) return dflt;
  if (!s[key].is_number_integer() || s[key].get<int64_t>() < 0)
    error(std::string("'") + key + "' must be a non-negative integer");
  return s[key].get<int64_t>();
}

std::string string_schema_gbnf(const json& s, const std::string& name, const AddRuleFn& add_rule) {
  if (s.contains("pattern")) {
    if (s.contains("minLength") || s.contains("maxLength"))
      error("'pattern' with 'minLength' / 'maxLength' is not supported");
    if (s.contains("format")) error("'pattern' with 'format' is not supported");
    if (!s["pattern"].is_string()) error("'pattern' must be a string");
    RegexOptions o;
    o.json_string = o.search = true;
    return "\"\\\"\" " + regex_to_gbnf(s["pattern"].get<std::string>(), o) + " \"\\\"\"";
  }
  if (s.contains("format")) return format_schema(s);
  const int64_t lo = schema_count(s, "minLength", 0), hi = schema_count(s, "maxLength", -1);
  if (hi >= 0 && hi < lo) error("'maxLength' is below 'minLength'");
  if (lo > 2000 || hi > 2000) error("'minLength' / 'maxLength' above 2000 are not supported");
  if (lo == 0 && hi < 0) return "json-string";
  return counted_string_gbnf(lo, hi, name, add_rule);
}

std::string integer_schema_gbnf(const json& s, const std::string& name, const AddRuleFn& add_rule,
                               const std::function<void(std::string)>& add_rules) {
  int64_t lo = -kIntLimit, hi = kIntLimit;
  auto bound = [&](const char* key, int64_t& v, int64_t shift, bool upper) {
    if (!s.contains(key)) return;
    const json& b = s[key];
    if (!b.is_number()) error(std::string("'") + key + "' must be a number");
    const double d = b.get<double>();
    if (!(d <= double(kIntLimit) && d >= -double(kIntLimit))) error(std::string("'") + key + "' is out of range");
    int64_t x = upper ? int64_t(std::floor(d)) : int64_t(std::ceil(d));
    if (shift != 0 && double(x) == d) x += shift;
    v = upper ? std::min(v, x) : std::max(v, x);
  };
  bound("minimum", lo, 0, false);
  bound("exclusiveMinimum", lo, 1, false);
  bound("maximum", hi, 0, true);
  bound("exclusiveMaximum", hi, -1, true);
  if (lo > hi) error("the integer bounds admit no value");
  if (s.contains("multipleOf")) {
    const json& m = s["multipleOf"];
    if (!m.is_number() || !(m.get<double>() > 0)) error("'multipleOf' must be a number above 0");
    const double k = m.get<double>();
    if (k != std::floor(k) || k > 1e15) error("'multipleOf' is supported for whole numbers only, got " + m.dump());
    const int64_t step = int64_t(k);
    const bool bounded = lo > -kIntLimit || hi < kIntLimit;
    if (bounded) {
      // Few multiples between the bounds: list them.
      const int64_t first = lo >= 0 ? (lo + step - 1) / step * step : -(-lo / step * step);
      if (first > hi) error("'multipleOf' and the bounds admit no value");
      if ((hi - first) / step >= kMaxEnumerated)
        error("'multipleOf' with bounds spanning more than " + std::to_string(kMaxEnumerated) + " multiples is not supported");
      std::string out;
      for (int64_t v = first; v <= hi; v += step) out += (out.empty() ? "" : " | ") + lit(std::to_string(v));
      return "(" + out + ")";
    }
    std::string rules;
    const std::string body = multiple_of_gbnf(step, add_rule(name + "-mult", "\"\"") + "-m", rules);
    add_rules(std::move(rules));
    return body;
  }
  if (lo == -kIntLimit && hi == kIntLimit) return "json-int";
  return integer_range_gbnf(lo, hi);
}

std::string number_schema_gbnf(const json& s) {
  std::optional<NumberBound> lo, hi;
  auto bound = [&](const char* key, std::optional<NumberBound>& b, bool exclusive, bool upper) {
    if (!s.contains(key)) return;
    const json& v = s[key];
    if (!v.is_number()) error(std::string("'") + key + "' must be a number");
    const double d = v.get<double>();
    if (!(d <= double(kIntLimit) && d >= -double(kIntLimit))) error(std::string("'") + key + "' is out of range");
    if (d != std::floor(d))
      error(std::string("'") + key + "' on type 'number' is supported for whole numbers only, got " + v.dump());
    const NumberBound nb{int64_t(d), exclusive};
    // The tighter bound wins; at equal values the exclusive one.
    const bool tighter = !b || (upper ? nb.value < b->value : nb.value > b->value) ||
                         (nb.value == b->value && exclusive);
    if (tighter) b = nb;
  };
  bound("minimum", lo, false, false);
  bound("exclusiveMinimum", lo, true, false);
  bound("maximum", hi, false, true);
  bound("exclusiveMaximum", hi, true, true);
  if (!lo && !hi) return "json-number";
  const std::string out = number_range_gbnf(lo, hi);
  if (out.empty()) error("the number bounds admit no value");
  return out;
}

}  // namespace lite_llama::grammar

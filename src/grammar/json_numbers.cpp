#include "grammar/json_numbers.h"

#include <algorithm>
#include <map>
#include <vector>

#include "core/error.h"
#include "grammar/gbnf_parser.h"

namespace lite_llama::grammar {
namespace {

std::string lit(const std::string& s) { return "\"" + gbnf_escape(s) + "\""; }

// Decimal strings (no leading zeros) of the integers in [a, b], same number of digits.
std::string digits_between(const std::string& a, const std::string& b) {
  if (a.empty()) return "";
  if (a == b) return lit(a);
  if (a[0] == b[0]) return lit(a.substr(0, 1)) + " " + digits_between(a.substr(1), b.substr(1));
  const size_t n = a.size() - 1;
  const std::string rest_a = a.substr(1), rest_b = b.substr(1);
  const std::string any = n ? " [0-9]{" + std::to_string(n) + "}" : "";
  if (rest_a == std::string(n, '0') && rest_b == std::string(n, '9'))
    return std::string("[") + a[0] + "-" + b[0] + "]" + any;
  std::string out = "(" + lit(a.substr(0, 1)) + (n ? " (" + digits_between(rest_a, std::string(n, '9')) + ")" : "");
  if (a[0] + 1 <= b[0] - 1) out += std::string(" | [") + char(a[0] + 1) + "-" + char(b[0] - 1) + "]" + any;
  out += " | " + lit(b.substr(0, 1)) + (n ? " (" + digits_between(std::string(n, '0'), rest_b) + ")" : "") + ")";
  return out;
}

// The integers in [lo, hi], 0 <= lo <= hi.
std::string uint_range(int64_t lo, int64_t hi) {
  const std::string a = std::to_string(lo), b = std::to_string(hi);
  std::string out;
  for (size_t len = a.size(); len <= b.size(); ++len) {
    const std::string from = len == a.size() ? a : std::string(1, '1').append(len - 1, '0');
    const std::string to = len == b.size() ? b : std::string(len, '9');
    out += (out.empty() ? "" : " | ") + std::string("(") + digits_between(from, to) + ")";
  }
  return "(" + out + ")";
}

const char* kFraction = "(\".\" [0-9]{1,16})";
const char* kZeroFraction = "(\".\" \"0\"{1,16})";
const char* kNonZeroFraction = "(\".\" \"0\"{0,15} [1-9] [0-9]{0,15})";

// The decimals y >= 0 written without a sign, lo <= y <= hi (hi nullopt: unbounded), whole
// bounds with 0 <= lo. Integer part n with any fraction where every such y fits; the bounds
// themselves take the fractions that keep y inside.
std::string unsigned_range(NumberBound lo, std::optional<NumberBound> hi) {
  std::vector<std::string> alts;
  const int64_t top = hi ? hi->value : kJsonIntLimit;
  const int64_t a = lo.exclusive ? lo.value + 1 : lo.value;
  const int64_t b = hi ? top - 1 : kJsonIntLimit;  // n <= hi - 1 keeps n.fff below hi
  if (a <= b) alts.push_back(uint_range(a, b) + " " + kFraction + "?");
  if (lo.exclusive && lo.value < top) alts.push_back(lit(std::to_string(lo.value)) + " " + kNonZeroFraction);
  if (hi && !hi->exclusive && top >= lo.value && !(top == lo.value && lo.exclusive))
    alts.push_back(lit(std::to_string(top)) + " " + kZeroFraction + "?");
  std::string out;
  for (const auto& x : alts) out += (out.empty() ? "" : " | ") + x;
  return out.empty() ? "" : "(" + out + ")";
}

}  // namespace

std::string integer_range_gbnf(int64_t lo, int64_t hi) {
  std::string out;
  if (lo < 0) out = "\"-\" " + uint_range(std::max<int64_t>(1, -std::min<int64_t>(hi, -1)), -lo);
  if (hi >= 0) out += (out.empty() ? "" : " | ") + uint_range(std::max<int64_t>(0, lo), hi);
  return "(" + out + ")";
}

std::string number_range_gbnf(std::optional<NumberBound> lo, std::optional<NumberBound> hi) {
  std::string out;
  // x < 0, written "-" y with y > 0: y's bounds are x's mirrored.
  if (!lo || lo->value < 0) {
    NumberBound y_lo{0, true};
    if (hi && hi->value < 0) y_lo = {-hi->value, hi->exclusive};
    std::optional<NumberBound> y_hi;
    if (lo) y_hi = NumberBound{-lo->value, lo->exclusive};
    const std::string y = unsigned_range(y_lo, y_hi);
    if (!y.empty()) out = "\"-\" " + y;
  }
  // x >= 0.
  if (!hi || hi->value > 0 || (hi->value == 0 && !hi->exclusive)) {
    NumberBound x_lo{0, false};
    if (lo && lo->value >= 0) x_lo = *lo;
    const std::string x = unsigned_range(x_lo, hi);
    if (!x.empty()) out += (out.empty() ? "" : " | ") + x;
  }
  return out.empty() ? "" : "(" + out + ")";
}

std::string multiple_of_gbnf(int64_t k, const std::string& prefix, std::string& rules) {
  if (k < 1 || k > 100) fail("json schema: 'multipleOf' is supported for whole numbers 1 to 100 (or with bounds spanning at most 256 multiples), got {}", k);
  // prefix-r-n: n digits read so far, their value r mod k; the number may end where r is 0. At
  // most 16 digits, as every integer the grammars write; states that cannot reach an end within
  // them are left out.
  constexpr int kDigits = 16;
  std::vector<std::vector<char>> live(kDigits + 1, std::vector<char>(size_t(k), 0));
  live[kDigits][0] = 1;
  for (int n = kDigits - 1; n >= 1; --n)
    for (int64_t r = 0; r < k; ++r) {
      bool ok = r == 0;
      for (int d = 0; d <= 9 && !ok; ++d) ok = live[size_t(n + 1)][size_t((r * 10 + d) % k)];
      live[size_t(n)][size_t(r)] = ok;
    }
  auto state = [&](int64_t r, int n) { return prefix + "-" + std::to_string(r) + "-" + std::to_string(n); };
  // The digits after n of them with value r, grouped by the state they lead to.
  auto moves = [&](int64_t r, int n, int first_digit) {
    std::map<int64_t, std::string> by_target;
    for (int d = first_digit; d <= 9; ++d) {
      const int64_t t = (r * 10 + d) % k;
      if (live[size_t(n + 1)][size_t(t)]) by_target[t] += char('0' + d);
    }
    std::string alts;
    for (const auto& [t, ds] : by_target)
      alts += (alts.empty() ? "" : " | ") + std::string("[") + ds + "]" + (n + 1 < kDigits ? " " + state(t, n + 1) : "");
    return alts;
  };
  for (int n = 1; n < kDigits; ++n)
    for (int64_t r = 0; r < k; ++r) {
      if (!live[size_t(n)][size_t(r)]) continue;
      std::string alts = moves(r, n, 0);
      if (r == 0) alts = alts.empty() ? "\"\"" : "\"\" | " + alts;
      rules += state(r, n) + " ::= " + alts + "\n";
    }
  return "(\"0\" | \"-\"? (" + moves(0, 0, 1) + "))";
}

}  // namespace lite_llama::grammar

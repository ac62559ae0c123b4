#include "template/jinja_bigint.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "template/jinja_value.h"

namespace lite_llama::jinja {

namespace {

constexpr uint32_t kBase = 1000000000;
// Bounds memory and time: well past Python's 4300-digit printing limit, far below harm.
constexpr size_t kMaxLimbs = 2000;

void trim(BigInt& v) {
  while (!v.mag.empty() && v.mag.back() == 0) v.mag.pop_back();
  if (v.mag.empty()) v.neg = false;
  if (v.mag.size() > kMaxLimbs) fail("integer result too large (more than {} digits)", kMaxLimbs * 9);
}

int cmp_mag(const std::vector<uint32_t>& a, const std::vector<uint32_t>& b) {
  if (a.size() != b.size()) return a.size() < b.size() ? -1 : 1;
  for (size_t k = a.size(); k-- > 0;)
    if (a[k] != b[k]) return a[k] < b[k] ? -1 : 1;
  return 0;
}

std::vector<uint32_t> add_mag(const std::vector<uint32_t>& a, const std::vector<uint32_t>& b) {
  std::vector<uint32_t> out;
  uint32_t carry = 0;
  for (size_t k = 0; k < std::max(a.size(), b.size()) || carry; ++k) {
    uint32_t s = carry + (k < a.size() ? a[k] : 0) + (k < b.size() ? b[k] : 0);
    carry = s >= kBase;
    out.push_back(carry ? s - kBase : s);
  }
  return out;
}

// |a| - |b| where |a| >= |b|.
std::vector<uint32_t> sub_mag(const std::vector<uint32_t>& a, const std::vector<uint32_t>& b) {
  std::vector<uint32_t> out(a);
  int64_t borrow = 0;
  for (size_t k = 0; k < out.size(); ++k) {
    int64_t d = int64_t(out[k]) - borrow - (k < b.size() ? b[k] : 0);
    borrow = d < 0;
    out[k] = static_cast<uint32_t>(d < 0 ? d + kBase : d);
  }
  return out;
}

std::vector<uint32_t> mul_small(const std::vector<uint32_t>& a, uint32_t m) {
  std::vector<uint32_t> out;
  uint64_t carry = 0;
  for (uint32_t limb : a) {
    uint64_t p = uint64_t(limb) * m + carry;
    out.push_back(static_cast<uint32_t>(p % kBase));
    carry = p / kBase;
  }
  if (carry) out.push_back(static_cast<uint32_t>(carry));
  while (!out.empty() && out.back() == 0) out.pop_back();
  return out;
}

}  // namespace

BigInt BigInt::from_int(int64_t v) {
  BigInt out;
  out.neg = v < 0;
  uint64_t m = v < 0 ? uint64_t(0) - uint64_t(v) : uint64_t(v);
  for (; m; m /= kBase) out.mag.push_back(static_cast<uint32_t>(m % kBase));
  return out;
}

BigInt BigInt::from_double(double d) {
  if (std::fabs(d) < 9.2e18) return from_int(static_cast<int64_t>(d));
  int exp = 0;
  double frac = std::frexp(std::fabs(d), &exp);  // |d| = frac * 2^exp exactly, frac in [0.5, 1)
  BigInt out = mul(from_int(static_cast<int64_t>(std::ldexp(frac, 53))), pow(from_int(2), exp - 53));
  out.neg = d < 0;
  return out;
}

std::optional<BigInt> BigInt::parse(std::string_view s) {
  BigInt out;
  if (!s.empty() && (s[0] == '+' || s[0] == '-')) {
    out.neg = s[0] == '-';
    s.remove_prefix(1);
  }
  if (s.empty() || !std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return std::nullopt;
  for (size_t end = s.size(); end > 0; end -= std::min<size_t>(end, 9)) {
    size_t begin = end >= 9 ? end - 9 : 0;
    out.mag.push_back(static_cast<uint32_t>(std::stoul(std::string(s.substr(begin, end - begin)))));
  }
  trim(out);
  return out;
}

std::optional<int64_t> BigInt::to_int64() const {
  if (mag.size() > 3) return std::nullopt;
  unsigned __int128 m = 0;
  for (size_t k = mag.size(); k-- > 0;) m = m * kBase + mag[k];
  unsigned __int128 limit = neg ? (unsigned __int128)INT64_MAX + 1 : (unsigned __int128)INT64_MAX;
  if (m > limit) return std::nullopt;
  return neg ? static_cast<int64_t>(-static_cast<__int128>(m)) : static_cast<int64_t>(m);
}

double BigInt::to_double() const {
  // Correct rounding from the decimal text (Python's float(int) rounds correctly too).
  if (mag.size() > 40) fail("int too large to convert to float");
  std::string text = to_string();
  double d = std::strtod(text.c_str(), nullptr);
  if (std::isinf(d)) fail("int too large to convert to float");
  return d;
}

std::string BigInt::to_string() const {
  if (mag.empty()) return "0";
  std::string out = neg ? "-" : "";
  out += std::to_string(mag.back());
  for (size_t k = mag.size() - 1; k-- > 0;) {
    std::string limb = std::to_string(mag[k]);
    out += std::string(9 - limb.size(), '0') + limb;
  }
  if (out.size() - neg > 4300)
    fail("Exceeds the limit (4300 digits) for integer string conversion");
  return out;
}

int compare(const BigInt& a, const BigInt& b) {
  if (a.neg != b.neg) return a.neg ? -1 : 1;
  int c = cmp_mag(a.mag, b.mag);
  return a.neg ? -c : c;
}

BigInt add(const BigInt& a, const BigInt& b) {
  BigInt out;
  if (a.neg == b.neg) {
    out.mag = add_mag(a.mag, b.mag);
    out.neg = a.neg;
  } else if (cmp_mag(a.mag, b.mag) >= 0) {
    out.mag = sub_mag(a.mag, b.mag);
    out.neg = a.neg;
  } else {
    out.mag = sub_mag(b.mag, a.mag);
    out.neg = b.neg;
  }
  trim(out);
  return out;
}

BigInt sub(const BigInt& a, const BigInt& b) {
  BigInt nb = b;
  nb.neg = !b.neg && !b.is_zero();
  return add(a, nb);
}

BigInt mul(const BigInt& a, const BigInt& b) {
  BigInt out;
  if (a.mag.size() + b.mag.size() > kMaxLimbs + 1)
    fail("integer result too large (more than {} digits)", kMaxLimbs * 9);
  std::vector<uint64_t> acc(a.mag.size() + b.mag.size() + 1, 0);
  for (size_t i = 0; i < a.mag.size(); ++i) {
    uint64_t carry = 0;
    for (size_t j = 0; j < b.mag.size() || carry; ++j) {
      uint64_t cur = acc[i + j] + carry + (j < b.mag.size() ? uint64_t(a.mag[i]) * b.mag[j] : 0);
      acc[i + j] = cur % kBase;
      carry = cur / kBase;
    }
  }
  out.mag.assign(acc.begin(), acc.end());
  out.neg = a.neg != b.neg;
  trim(out);
  return out;
}

void floor_divmod(const BigInt& a, const BigInt& b, BigInt* q, BigInt* r) {
  // Schoolbook long division in base 1e9; each quotient limb found by binary search.
  BigInt quot, rem;
  quot.mag.assign(a.mag.size(), 0);
  for (size_t k = a.mag.size(); k-- > 0;) {
    rem.mag.insert(rem.mag.begin(), a.mag[k]);
    while (!rem.mag.empty() && rem.mag.back() == 0) rem.mag.pop_back();
    uint32_t lo = 0, hi = kBase - 1;
    while (lo < hi) {
      uint32_t mid = lo + (hi - lo + 1) / 2;
      if (cmp_mag(mul_small(b.mag, mid), rem.mag) <= 0) lo = mid; else hi = mid - 1;
    }
    if (lo) rem.mag = sub_mag(rem.mag, mul_small(b.mag, lo));
    while (!rem.mag.empty() && rem.mag.back() == 0) rem.mag.pop_back();
    quot.mag[k] = lo;
  }
  quot.neg = a.neg != b.neg;
  rem.neg = a.neg;
  trim(quot);
  trim(rem);
  if (!rem.is_zero() && a.neg != b.neg) {  // Python floors toward negative infinity
    quot = sub(quot, BigInt::from_int(1));
    rem = add(rem, b);
  }
  *q = std::move(quot);
  *r = std::move(rem);
}

BigInt pow(const BigInt& base, int64_t exp) {
  BigInt result = BigInt::from_int(1), b = base;
  for (; exp > 0; exp >>= 1) {
    if (exp & 1) result = mul(result, b);
    if (exp > 1) b = mul(b, b);
  }
  return result;
}

void big_int_error() { fail("integer beyond 64 bits is not supported in this operation"); }
double big_to_double(const BigInt& v) { return v.to_double(); }

Value Value::integer(BigInt v) {
  if (auto small = v.to_int64()) return integer(*small);
  Value out = integer(int64_t{0});
  out.big = std::make_shared<const BigInt>(std::move(v));
  return out;
}

BigInt Value::as_big() const { return big ? *big : BigInt::from_int(as_int()); }

Value big_arithmetic(const std::string& op, const Value& l, const Value& r) {
  BigInt a = l.as_big(), b = r.as_big();
  if (op == "+") return Value::integer(add(a, b));
  if (op == "-") return Value::integer(sub(a, b));
  if (op == "*") return Value::integer(mul(a, b));
  if (op == "**") {
    auto e = b.to_int64();
    if (!e) fail("integer result too large (exponent {})", b.to_string());
    return Value::integer(pow(a, *e));
  }
  if (b.is_zero()) fail("integer division or modulo by zero");
  BigInt q, m;
  floor_divmod(a, b, &q, &m);
  return Value::integer(op == "//" ? std::move(q) : std::move(m));
}

int big_compare(const Value& a, const Value& b) {
  auto exact = [](const Value& v, bool* ok) {
    *ok = v.is_integral() || (std::isfinite(v.f) && v.f == std::floor(v.f));
    return *ok ? (v.is_integral() ? v.as_big() : BigInt::from_double(v.f)) : BigInt{};
  };
  bool ok_a = false, ok_b = false;
  BigInt x = exact(a, &ok_a), y = exact(b, &ok_b);
  if (ok_a && ok_b) return compare(x, y);
  // A non-integral or infinite float is far from any big int: double order is exact enough.
  double fx = ok_a ? (x.neg ? -1e300 : 1e300) : a.f, fy = ok_b ? (y.neg ? -1e300 : 1e300) : b.f;
  if (std::isnan(fx) || std::isnan(fy)) return 0;  // as compare() treats NaN; equals() checks first
  return fx < fy ? -1 : (fx > fy ? 1 : 0);
}

}  // namespace lite_llama::jinja

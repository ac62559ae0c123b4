// Arbitrary-precision integers for template arithmetic: Python ints never overflow, so values
// past 64 bits are kept exactly (+ - * // % **, comparisons, printing) instead of wrapping.
// Only values outside int64 are stored this way; everything else stays a plain int64.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace lite_llama::jinja {

struct BigInt {
  bool neg = false;
  std::vector<uint32_t> mag;  // base 1e9 limbs, least significant first; empty means zero

  static BigInt from_int(int64_t v);
  static BigInt from_double(double integral);           // exact; the double must be integral
  static std::optional<BigInt> parse(std::string_view);  // [+-]digits
  bool is_zero() const { return mag.empty(); }
  std::optional<int64_t> to_int64() const;
  double to_double() const;     // throws OverflowError's message beyond the double range
  std::string to_string() const;  // throws past Python's 4300-digit str() limit
};

int compare(const BigInt& a, const BigInt& b);
BigInt add(const BigInt& a, const BigInt& b);
BigInt sub(const BigInt& a, const BigInt& b);
BigInt mul(const BigInt& a, const BigInt& b);
// Python's floor division and modulo (remainder takes the divisor's sign); b must be nonzero.
void floor_divmod(const BigInt& a, const BigInt& b, BigInt* q, BigInt* r);
BigInt pow(const BigInt& base, int64_t exp);  // exp >= 0

struct Value;
// Exact int (or bool) arithmetic for + - * // % ** (non-negative exponent): the slow path the
// operators take once a 64-bit result would overflow or an operand is already big.
Value big_arithmetic(const std::string& op, const Value& l, const Value& r);
// Orders two numbers where at least one is a big int, exactly (also against floats).
int big_compare(const Value& a, const Value& b);

}  // namespace lite_llama::jinja

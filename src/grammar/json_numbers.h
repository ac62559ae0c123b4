// Number grammars for the JSON Schema compiler: integers and decimals between bounds, and
// multiples of an integer, written as JSON numbers (no leading zeros).
#pragma once
#include <cstdint>
#include <optional>
#include <string>

namespace lite_llama::grammar {

constexpr int64_t kJsonIntLimit = 9999999999999999;  // 16 digits: integers the grammars write

// GBNF (an expression, no rule) for the integers in [lo, hi], both within +-kJsonIntLimit.
std::string integer_range_gbnf(int64_t lo, int64_t hi);

// A bound of a decimal: a whole number (|v| <= kJsonIntLimit), exclusive or not.
struct NumberBound {
  int64_t value = 0;
  bool exclusive = false;
};
// GBNF for the decimals x with lo <= x <= hi (or < for exclusive bounds; nullopt: unbounded),
// written as an integer part and an optional fraction of up to 16 digits (no exponent). Returns
// "" when no number fits.
std::string number_range_gbnf(std::optional<NumberBound> lo, std::optional<NumberBound> hi);

// GBNF for the integers that are multiples of k (1 <= k <= 1000), any size up to 16 digits:
// the digits run through the residues mod k.
std::string multiple_of_gbnf(int64_t k, const std::string& rule_prefix, std::string& rules);

}  // namespace lite_llama::grammar

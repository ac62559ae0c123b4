// String grammars for the JSON Schema compiler: the string formats it supports, and object keys
// that must differ from the declared property names however they are escaped.
#pragma once
#include <cstdint>
#include <functional>
#include <set>
#include <string>

namespace lite_llama::grammar {

// A format's GBNF for the string body (between the quotes) and its length range in characters.
struct StringFormat {
  std::string body;
  int64_t shortest = 0, longest = -1;  // longest -1: no limit
};
// nullptr when the format is not supported.
const StringFormat* string_format(const std::string& name);

// GBNF for a quoted JSON string that does not decode to any of `names` (UTF-8). `add_rule(base,
// body)` adds a rule and returns its name. Uses json-char from the shared primitives.
std::string json_key_except_gbnf(const std::set<std::string>& names,
                                 const std::function<std::string(const std::string&, const std::string&)>& add_rule);

// GBNF for a quoted JSON string of lo..hi characters (hi -1: no limit), counted as jsonschema
// counts the decoded string: an escaped surrogate pair is one character, a lone surrogate escape
// is one too. `add_rule` as above.
std::string counted_string_gbnf(int64_t lo, int64_t hi, const std::string& name,
                                const std::function<std::string(const std::string&, const std::string&)>& add_rule);

}  // namespace lite_llama::grammar

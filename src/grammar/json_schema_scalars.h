// The keywords of string, integer and number schemas for the JSON Schema compiler
// (json_schema.cpp): minLength, maxLength, pattern and format; minimum, maximum, the exclusive
// bounds and multipleOf. Errors are lite_llama::Error "json schema: ..." naming the keyword.
#pragma once
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

namespace lite_llama::grammar {

// add_rule(base, body): adds a rule to the schema's grammar and returns its name.
using AddRuleFn = std::function<std::string(const std::string& base, const std::string& body)>;

// A count keyword's value (minLength, maxItems, ...), `dflt` when absent; a non-negative integer.
int64_t schema_count(const nlohmann::ordered_json& s, const char* key, int64_t dflt);

// GBNF for a string schema; `name` names the rules it adds.
std::string string_schema_gbnf(const nlohmann::ordered_json& s, const std::string& name, const AddRuleFn& add_rule);
// GBNF for an integer schema (or a number one with multipleOf); add_rules takes rules already
// written out whole.
std::string integer_schema_gbnf(const nlohmann::ordered_json& s, const std::string& name, const AddRuleFn& add_rule,
                               const std::function<void(std::string)>& add_rules);
// GBNF for a number schema without multipleOf.
std::string number_schema_gbnf(const nlohmann::ordered_json& s);

}  // namespace lite_llama::grammar

// JSON Schema (the subset structured outputs use) -> GBNF text. Supported: type (one or a
// list), properties, required, additionalProperties (boolean or schema), patternProperties (one
// pattern, closed objects), maxProperties, minProperties <= 1 and propertyNames (objects of
// extra keys only), items, prefixItems, minItems, maxItems, uniqueItems (false, or with
// maxItems <= 1), enum and const (their values that the schema's other keywords admit too, as
// the compiler writes them: an object's keys in the grammar's order, no exponent under bounds),
// anyOf, oneOf (as anyOf), allOf (merged: json_schema_merge.h; siblings apply too), $ref to #,
// #/$defs/... or #/definitions/... (siblings apply too), string minLength / maxLength / pattern /
// format (date, time, date-time, uuid, email; pattern alone, format with lengths only where every
// string of the format fits them), integer minimum / maximum /
// exclusive bounds / multipleOf, number bounds that are whole numbers (the number is then
// written without exponent), and the annotations (title, description, default, examples, ...).
// Any other keyword is an error naming it: a schema is never silently loosened.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

namespace lite_llama::grammar {

// Throws lite_llama::Error "json schema: ..." naming the keyword or value at fault.
std::string json_schema_to_gbnf(const nlohmann::ordered_json& schema);
// The schema's rules alone, its start rule named `start` and every other rule prefixed with it,
// so that several schemas share one grammar (tool calls); add json_primitives_gbnf() once.
std::string json_schema_rules(const nlohmann::ordered_json& schema, const std::string& start);
std::string json_primitives_gbnf();
// Any JSON value ({"type": "json_object"} asks for an object at the top).
std::string json_object_gbnf();

}  // namespace lite_llama::grammar

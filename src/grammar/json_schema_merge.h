// allOf for the JSON Schema compiler: the schemas of an allOf merged into one schema that admits
// exactly the values all of them admit, for the keywords whose intersection is again a schema
// (type, properties with required and additionalProperties, bounds, lengths, counts, enum and
// const, items (not beside another schema's prefixItems), anyOf / oneOf distributed over the
// rest). Anything else is an error naming it.
#pragma once
#include <functional>
#include <nlohmann/json.hpp>

namespace lite_llama::grammar {

// deref: the schema a {"$ref": ...} points to (throws for an unresolved one).
using SchemaDeref = std::function<nlohmann::ordered_json(const nlohmann::ordered_json& ref_schema)>;

// Throws lite_llama::Error "json schema: ..." naming the keyword it cannot merge.
nlohmann::ordered_json merge_all_of(const nlohmann::ordered_json& schemas, const SchemaDeref& deref);

}  // namespace lite_llama::grammar

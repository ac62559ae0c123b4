#include "grammar/json_schema_merge.h"

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "core/error.h"

namespace lite_llama::grammar {
namespace {

using json = nlohmann::ordered_json;

constexpr int kMaxFlatten = 64;

[[noreturn]] void error(const std::string& msg) { fail("json schema: {}", msg); }

// Keywords that describe but do not constrain (dropped from the merged schema).
const std::set<std::string> kNotes = {"title", "description", "default", "examples", "$schema", "$id",
                                      "$comment", "deprecated", "readOnly", "writeOnly", "$defs",
                                      "definitions", "strict", "discriminator"};

// The allOf's schemas with nested allOf and $ref unfolded, `true` dropped.
void flatten(const json& s, const SchemaDeref& deref, std::vector<json>& out, int depth) {
  if (depth > kMaxFlatten) error("allOf / $ref nested deeper than " + std::to_string(kMaxFlatten) + " levels");
  if (s.is_boolean()) {
    if (!s.get<bool>()) error("the schema 'false' matches nothing");
    return;
  }
  if (!s.is_object()) error("a schema must be an object or a boolean, got " + s.dump().substr(0, 80));
  json rest = s;
  if (rest.contains("$ref")) {
    const json target = deref(json{{"$ref", rest["$ref"]}});
    rest.erase("$ref");
    flatten(target, deref, out, depth + 1);
  }
  if (rest.contains("allOf")) {
    const json list = rest["allOf"];
    if (!list.is_array() || list.empty()) error("'allOf' must be a non-empty array");
    rest.erase("allOf");
    for (const auto& sub : list) flatten(sub, deref, out, depth + 1);
  }
  for (const auto& k : kNotes) rest.erase(k);
  if (!rest.empty()) out.push_back(std::move(rest));
}

std::vector<std::string> types_of(const json& t) {
  if (t.is_string()) return {t.get<std::string>()};
  if (!t.is_array() || t.empty()) error("'type' must be a string or a non-empty array");
  std::vector<std::string> out;
  for (const auto& x : t) {
    if (!x.is_string()) error("'type' entries must be strings");
    out.push_back(x.get<std::string>());
  }
  return out;
}

// Types in both lists ("integer" is a "number").
std::vector<std::string> intersect_types(const std::vector<std::string>& a, const std::vector<std::string>& b) {
  std::vector<std::string> out;
  auto has = [](const std::vector<std::string>& v, const std::string& t) {
    return std::find(v.begin(), v.end(), t) != v.end();
  };
  for (const auto& t : a) {
    if (has(b, t)) out.push_back(t);
    else if (t == "integer" && has(b, "number")) out.push_back(t);
    else if (t == "number" && has(b, "integer") && !has(out, "integer")) out.push_back("integer");
  }
  return out;
}

json merge_flat(const std::vector<json>& subs) {
  json out = json::object();
  std::vector<std::string> types;
  bool typed = false;
  std::set<std::string> required;
  std::vector<json> items;
  bool have_enum = false;
  json enum_values = json::array();
  for (const json& s : subs) {
    for (const auto& [k, v] : s.items()) {
      if (k == "type") {
        types = typed ? intersect_types(types, types_of(v)) : types_of(v);
        typed = true;
      } else if (k == "required") {
        if (!v.is_array()) error("'required' must be an array");
        for (const auto& r : v) {
          if (!r.is_string()) error("'required' entries must be strings");
          required.insert(r.get<std::string>());
        }
      } else if (k == "properties" || k == "additionalProperties") {
        // merged below, across all the schemas at once
      } else if (k == "minimum" || k == "exclusiveMinimum" || k == "minLength" || k == "minItems") {
        if (!v.is_number()) error("'" + k + "' must be a number");
        if (!out.contains(k) || v.get<double>() > out[k].get<double>()) out[k] = v;
      } else if (k == "maximum" || k == "exclusiveMaximum" || k == "maxLength" || k == "maxItems") {
        if (!v.is_number()) error("'" + k + "' must be a number");
        if (!out.contains(k) || v.get<double>() < out[k].get<double>()) out[k] = v;
      } else if (k == "enum" || k == "const") {
        json values = k == "const" ? json::array({v}) : v;
        if (!values.is_array() || values.empty()) error("'enum' must be a non-empty array");
        if (have_enum) {
          json kept = json::array();
          for (const auto& x : enum_values)
            if (std::find(values.begin(), values.end(), x) != values.end()) kept.push_back(x);
          values = std::move(kept);
        }
        enum_values = std::move(values);
        have_enum = true;
      } else if (k == "items") {
        items.push_back(v);
      } else if (out.contains(k) && out[k] != v) {
        error("'allOf' with two different '" + k + "' is not supported");
      } else {
        out[k] = v;  // one schema has it (or all have the same): the compiler checks it
      }
    }
  }
  if (typed) {
    if (types.empty()) error("the 'allOf' schemas have no type in common: they admit no value");
    out["type"] = types.size() == 1 ? json(types[0]) : json(types);
  }
  if (have_enum) {
    if (enum_values.empty()) error("the 'allOf' schemas' enum / const values have none in common");
    out["enum"] = enum_values;
  }
  if (!items.empty()) out["items"] = items.size() == 1 ? items[0] : json{{"allOf", items}};
  // `items` of a schema without prefixItems binds every item, the prefix's too; merged beside
  // another schema's prefixItems it would bind only the items after them.
  bool prefixed = false, unprefixed_items = false;
  for (const json& s : subs) {
    prefixed = prefixed || (s.contains("prefixItems") && !s["prefixItems"].empty());
    unprefixed_items = unprefixed_items || (s.contains("items") && !s.contains("prefixItems"));
  }
  if (prefixed && unprefixed_items) error("'allOf' with 'items' beside another schema's 'prefixItems' is not supported");
  // Properties: a key declared anywhere must satisfy, in each schema, its declared schema there,
  // else that schema's additionalProperties (false: the key is not allowed at all).
  std::vector<std::string> keys;
  bool objects = false;
  for (const json& s : subs) {
    if (s.contains("patternProperties")) error("'patternProperties' inside 'allOf' is not supported");
    if (s.contains("properties") || s.contains("additionalProperties")) objects = true;
    if (s.contains("properties")) {
      if (!s["properties"].is_object()) error("'properties' must be an object");
      for (const auto& [k, v] : s["properties"].items())
        if (std::find(keys.begin(), keys.end(), k) == keys.end()) keys.push_back(k);
    }
  }
  if (objects) {
    json props = json::object();
    for (const auto& key : keys) {
      std::vector<json> parts;
      bool allowed = true;
      for (const json& s : subs) {
        if (s.contains("properties") && s["properties"].contains(key)) {
          parts.push_back(s["properties"][key]);
        } else if (s.contains("additionalProperties")) {
          const json& a = s["additionalProperties"];
          if (a.is_boolean() && !a.get<bool>()) allowed = false;
          else if (!a.is_boolean()) parts.push_back(a);
        }
      }
      if (!allowed) {
        if (required.count(key)) error("'allOf': required property '" + key + "' is not allowed by another schema");
        continue;
      }
      props[key] = parts.empty() ? json::object() : parts.size() == 1 ? parts[0] : json{{"allOf", parts}};
    }
    std::vector<json> extra;
    bool closed = false;
    for (const json& s : subs) {
      if (!s.contains("additionalProperties")) continue;
      const json& a = s["additionalProperties"];
      if (a.is_boolean()) closed = closed || !a.get<bool>();
      else extra.push_back(a);
    }
    for (const auto& r : required)
      if (!props.contains(r)) {
        if (closed) error("'allOf': required property '" + r + "' is not allowed by another schema");
        props[r] = extra.empty() ? json::object() : extra.size() == 1 ? extra[0] : json{{"allOf", extra}};
      }
    out["properties"] = std::move(props);
    if (closed) out["additionalProperties"] = false;
    else if (!extra.empty()) out["additionalProperties"] = extra.size() == 1 ? extra[0] : json{{"allOf", extra}};
  }
  if (!required.empty()) {
    json r = json::array();
    for (const auto& k : required) r.push_back(k);
    out["required"] = std::move(r);
  }
  return out;
}

json merge(std::vector<json> subs, int depth) {
  if (depth > kMaxFlatten) error("'allOf' with too many 'anyOf' to distribute");
  // anyOf / oneOf (read as anyOf) distribute: allOf(A, anyOf(B, C)) = anyOf(allOf(A, B), allOf(A, C)).
  for (size_t i = 0; i < subs.size(); ++i) {
    for (const char* key : {"anyOf", "oneOf"}) {
      if (!subs[i].contains(key)) continue;
      const json alts = subs[i][key];
      if (!alts.is_array() || alts.empty()) error(std::string("'") + key + "' must be a non-empty array");
      subs[i].erase(key);
      json out = json::array();
      for (const auto& alt : alts) {
        std::vector<json> with = subs;
        with.push_back(alt);
        out.push_back(json{{"allOf", with}});
      }
      return json{{"anyOf", out}};
    }
  }
  return merge_flat(subs);
}

}  // namespace

json merge_all_of(const json& schemas, const SchemaDeref& deref) {
  if (!schemas.is_array() || schemas.empty()) error("'allOf' must be a non-empty array");
  std::vector<json> subs;
  for (const auto& s : schemas) flatten(s, deref, subs, 0);
  if (subs.empty()) return json::object();
  return merge(std::move(subs), 0);
}

}  // namespace lite_llama::grammar

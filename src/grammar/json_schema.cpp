#include "grammar/json_schema.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <set>

#include "core/error.h"
#include "grammar/gbnf_parser.h"
#include "grammar/json_numbers.h"
#include "grammar/json_schema_merge.h"
#include "grammar/json_schema_scalars.h"
#include "grammar/json_strings.h"
#include "grammar/matcher.h"
#include "grammar/regex_to_gbnf.h"

namespace lite_llama::grammar {

using json = nlohmann::ordered_json;

namespace {

constexpr int kMaxDepth = 64;
constexpr int kMaxParts = 20000;  // schemas visited: bounds what allOf / anyOf distribution expands to
constexpr int64_t kIntLimit = kJsonIntLimit;

// The JSON primitives every schema grammar shares.
const char* kPrimitives = R"(ws ::= [ \t\n]{0,20}
json-char ::= [^"\\\x00-\x1F] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4})
json-string ::= "\"" json-char* "\""
json-int ::= "-"? ("0" | [1-9] [0-9]{0,15})
json-number ::= json-int ("." [0-9]{1,16})? ([eE] [-+]? [0-9]{1,4})?
json-boolean ::= "true" | "false"
json-null ::= "null"
json-value ::= json-object | json-array | json-string | json-number | json-boolean | json-null
json-object ::= "{" ws (json-string ws ":" ws json-value ws ("," ws json-string ws ":" ws json-value ws)*)? "}"
json-array ::= "[" ws (json-value ws ("," ws json-value ws)*)? "]"
)";

// Keywords that describe but do not constrain.
const std::set<std::string> kAnnotations = {
    "title", "description", "default", "examples", "$schema", "$id", "$comment", "deprecated",
    "readOnly", "writeOnly", "$defs", "definitions", "strict", "discriminator"};

std::string lit(const std::string& s) {
  std::string out(1, '"');
  out.append(gbnf_escape(s)).push_back('"');
  return out;
}

class SchemaCompiler {
 public:
  SchemaCompiler(const json& root, std::string prefix) : root_(root), prefix_(std::move(prefix)) {}

  // The schema's rules, the start rule named `start`; without the shared primitives.
  std::string run(const std::string& start) {
    const std::string body = visit(root_, "root", 0);
    std::string out = start + " ::= " + body + "\n";
    for (const auto& r : rules_) out += r;
    return out;
  }

 private:
  [[noreturn]] static void error(const std::string& msg) { fail("json schema: {}", msg); }

  std::string add_rule(const std::string& base, const std::string& body) {
    std::string name = base;
    for (char& c : name)
      if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-')) c = '-';
    name = prefix_ + "s-" + name + "-" + std::to_string(rules_.size());
    rules_.push_back(name + " ::= " + body + "\n");
    return name;
  }

  std::string visit(const json& s, const std::string& name, int depth) {
    if (depth > kMaxDepth) error("nested deeper than " + std::to_string(kMaxDepth) + " levels");
    if (++parts_ > kMaxParts) error("the schema expands to more than " + std::to_string(kMaxParts) + " parts");
    if (s.is_boolean()) {
      if (!s.get<bool>()) error("the schema 'false' matches nothing");
      return "json-value";
    }
    if (!s.is_object()) error("a schema must be an object or a boolean, got " + s.dump().substr(0, 80));
    for (const auto& [k, v] : s.items()) {
      static const std::set<std::string> known = {
          "type", "properties", "required", "additionalProperties", "items", "minItems",
          "maxItems", "enum", "const", "anyOf", "oneOf", "allOf", "$ref", "minLength",
          "maxLength", "pattern", "format", "minimum", "maximum", "exclusiveMinimum",
          "exclusiveMaximum", "multipleOf", "prefixItems", "uniqueItems", "patternProperties",
          "minProperties", "maxProperties", "propertyNames"};
      if (!known.count(k) && !kAnnotations.count(k))
        error("unsupported keyword '" + k + "'");
    }
    if (s.contains("$ref")) {
      for (const auto& [k, v] : s.items())
        if (k != "$ref" && !kAnnotations.count(k)) {  // both apply: {"allOf": [{"$ref": ...}, rest]}
          json rest = s;
          rest.erase("$ref");
          return visit(json{{"allOf", json::array({json{{"$ref", s["$ref"]}}, rest})}}, name, depth + 1);
        }
      return ref(s["$ref"], depth);
    }
    if (s.contains("const") || s.contains("enum")) return enumerated(s, depth);
    if (s.contains("allOf")) {
      // Keywords beside allOf are one more of its schemas.
      const json& list = s["allOf"];
      if (!list.is_array() || list.empty()) error("'allOf' must be a non-empty array");
      json all = json::array({s});
      all[0].erase("allOf");
      for (const auto& sub : list) all.push_back(sub);
      return visit(merge_all_of(all, deref_), name, depth + 1);
    }
    for (const char* key : {"anyOf", "oneOf"}) {
      if (!s.contains(key)) continue;
      // Keywords beside anyOf apply to every alternative: {"allOf": [rest, {"anyOf": ...}]}.
      bool siblings = false;
      for (const auto& [k, v] : s.items()) siblings = siblings || (k != key && !kAnnotations.count(k));
      if (siblings) {
        json rest = s;
        rest.erase(key);
        return visit(json{{"allOf", json::array({rest, json{{key, s[key]}}})}}, name, depth + 1);
      }
      if (!s[key].is_array() || s[key].empty()) error(std::string("'") + key + "' must be a non-empty array");
      std::string out;
      int i = 0;
      for (const auto& sub : s[key])
        out += (out.empty() ? "" : " | ") + visit(sub, name + "-" + std::to_string(i++), depth + 1);
      return "(" + out + ")";
    }
    if (s.contains("type")) {
      const json& t = s["type"];
      if (t.is_string()) return typed(s, t.get<std::string>(), name, depth);
      if (!t.is_array() || t.empty()) error("'type' must be a string or a non-empty array");
      std::string out;
      for (const auto& one : t) {
        if (!one.is_string()) error("'type' entries must be strings");
        out += (out.empty() ? "" : " | ") + typed(s, one.get<std::string>(), name, depth);
      }
      return "(" + out + ")";
    }
    if (s.contains("properties") || s.contains("additionalProperties") || s.contains("required"))
      return typed(s, "object", name, depth);
    if (s.contains("patternProperties") || s.contains("minProperties") || s.contains("maxProperties") ||
        s.contains("propertyNames"))
      return typed(s, "object", name, depth);
    if (s.contains("items") || s.contains("prefixItems")) return typed(s, "array", name, depth);
    for (const char* k : {"minLength", "maxLength", "pattern", "format", "minimum", "maximum",
                          "exclusiveMinimum", "exclusiveMaximum", "minItems", "maxItems", "multipleOf",
                          "uniqueItems"})
      if (s.contains(k)) error(std::string("'") + k + "' needs a 'type'");
    return "json-value";
  }

  // enum / const: the listed values that the schema's other keywords admit. Those keywords are
  // compiled alone and each value's JSON text is run through that grammar, so a value passes
  // exactly when the compiler would have written it (an object's keys in the order the grammar
  // writes them, a number without exponent where bounds apply); none passing is an error.
  std::string enumerated(const json& s, int depth) {
    json values = listed_values(s);
    json rest = s;
    rest.erase("enum");
    rest.erase("const");
    for (const auto& k : kAnnotations) rest.erase(k);
    if (!rest.empty()) {
      // Untyped, each keyword binds the values of its type only (minLength: strings).
      if (!rest.contains("type")) rest["type"] = types_of(values);
      SchemaCompiler sub(root_, "");
      sub.parts_ = parts_;
      const std::string body = sub.visit(rest, "enum", depth + 1);
      parts_ = sub.parts_;
      std::string text = "root ::= " + body + "\n";
      for (const auto& r : sub.rules_) text += r;
      const Grammar g = compile_gbnf(text + kPrimitives);
      json kept = json::array();
      for (const auto& v : values)
        if (literal_admitted(g, v)) kept.push_back(v);
      if (kept.empty()) error("no 'enum' / 'const' value satisfies the schema's other keywords: they admit no value");
      values = std::move(kept);
    }
    std::string out;
    for (const auto& v : values) out += (out.empty() ? "" : " | ") + lit(v.dump());
    return "(" + out + ")";
  }

  // The values of enum, of const, or of both (the const when the enum lists it).
  static json listed_values(const json& s) {
    if (s.contains("enum") && (!s["enum"].is_array() || s["enum"].empty()))
      error("'enum' must be a non-empty array");
    if (!s.contains("const")) return s["enum"];
    if (s.contains("enum") && std::find(s["enum"].begin(), s["enum"].end(), s["const"]) == s["enum"].end())
      error("'const' is not among the 'enum' values: they admit no value");
    return json::array({s["const"]});
  }

  // The JSON Schema types of the values, each once.
  static json types_of(const json& values) {
    json out = json::array();
    for (const auto& v : values) {
      const char* t = v.is_null() ? "null" : v.is_boolean() ? "boolean" : v.is_number_float() ? "number"
                      : v.is_number() ? "integer" : v.is_string() ? "string" : v.is_array() ? "array" : "object";
      if (std::find(out.begin(), out.end(), json(t)) == out.end()) out.push_back(t);
    }
    return out;
  }

  // `v` written as JSON is a sentence of g; a whole float (1.0) is an integer in JSON Schema, so
  // its integer spelling counts too (the value is still written as given).
  static bool literal_admitted(const Grammar& g, const json& v) {
    std::vector<std::string> texts{v.dump()};
    if (v.is_number_float()) {
      const double d = v.get<double>();
      if (d == std::floor(d) && std::fabs(d) <= double(kIntLimit)) texts.push_back(std::to_string(int64_t(d)));
    }
    for (const auto& t : texts) {
      Matcher m(g);
      if (m.accept_bytes(t) && m.can_end()) return true;
    }
    return false;
  }

  // The schema a $ref points to (#, #/$defs/<key>, #/definitions/<key>).
  const json& resolve(const json& r, std::string* key_out = nullptr) const {
    if (!r.is_string()) error("'$ref' must be a string");
    const std::string path = r.get<std::string>();
    std::string key;
    const json* defs = nullptr;
    for (const char* prefix : {"#/$defs/", "#/definitions/"}) {
      if (path.rfind(prefix, 0) != 0) continue;
      key = path.substr(std::string(prefix).size());
      const std::string section = std::string(prefix).substr(2, std::string(prefix).size() - 3);
      if (root_.contains(section) && root_[section].is_object() && root_[section].contains(key))
        defs = &root_[section][key];
    }
    if (path == "#") defs = &root_;
    if (!defs) error("unsupported or unresolved $ref '" + path + "'");
    if (key_out) *key_out = key;
    return *defs;
  }

  std::string ref(const json& r, int depth) {
    if (!r.is_string()) error("'$ref' must be a string");
    const std::string path = r.get<std::string>();
    auto it = refs_.find(path);
    if (it != refs_.end()) return it->second;
    std::string key;
    const json* defs = &resolve(r, &key);
    // Name the rule first so that recursive schemas refer to it.
    std::string name = prefix_ + "r-";
    for (char c : key) name += (std::isalnum(uint8_t(c)) ? c : '-');
    name.append("-").append(std::to_string(refs_.size()));  // not "-" + ...: GCC 12 warns falsely (-Wrestrict)
    refs_[path] = name;
    const std::string body = visit(*defs, key, depth + 1);
    rules_.push_back(name + " ::= " + body + "\n");
    return name;
  }

  std::string typed(const json& s, const std::string& t, const std::string& name, int depth) {
    auto only = [&](std::initializer_list<const char*> keys) {
      for (const char* k : {"properties", "required", "additionalProperties", "items", "minItems",
                            "maxItems", "minLength", "maxLength", "pattern", "format", "minimum",
                            "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf",
                            "prefixItems", "uniqueItems", "patternProperties", "minProperties",
                            "maxProperties", "propertyNames"}) {
        bool ok = false;
        for (const char* allowed : keys) ok = ok || std::string(k) == allowed;
        if (!ok && s.contains(k) && !(s.contains("type") && s["type"].is_array()))
          error(std::string("'") + k + "' is not supported for type '" + t + "'");
      }
    };
    if (t == "string") {
      only({"minLength", "maxLength", "pattern", "format"});
      return string_schema_gbnf(s, name, add_rule_);
    }
    if (t == "integer") {
      only({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"});
      return integer_schema_gbnf(s, name, add_rule_, add_rules_);
    }
    if (t == "number") {
      only({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"});
      // A whole multipleOf on a number admits only integers: the integer grammar writes them.
      if (s.contains("multipleOf")) return integer_schema_gbnf(s, name, add_rule_, add_rules_);
      return number_schema_gbnf(s);
    }
    if (t == "boolean") return only({}), "json-boolean";
    if (t == "null") return only({}), "json-null";
    if (t == "object") {
      only({"properties", "required", "additionalProperties", "patternProperties", "minProperties", "maxProperties",
            "propertyNames"});
      return object_schema(s, name, depth);
    }
    if (t == "array") {
      only({"items", "minItems", "maxItems", "prefixItems", "uniqueItems"});
      return array_schema(s, name, depth);
    }
    error("unknown type '" + t + "'");
  }

  std::string object_schema(const json& s, const std::string& name, int depth) {
    struct Prop {
      std::string kv;
      bool required;
    };
    std::vector<Prop> props;
    std::set<std::string> required, names;
    if (s.contains("required")) {
      if (!s["required"].is_array()) error("'required' must be an array");
      for (const auto& r : s["required"]) {
        if (!r.is_string()) error("'required' entries must be strings");
        required.insert(r.get<std::string>());
      }
    }
    std::vector<std::pair<std::string, const json*>> order;
    if (s.contains("properties")) {
      if (!s["properties"].is_object()) error("'properties' must be an object");
      for (const auto& [k, v] : s["properties"].items()) order.emplace_back(k, &v);
    }
    const json add = s.value("additionalProperties", json(true));
    const bool closed = add.is_boolean() && !add.get<bool>();
    for (const auto& r : required) {
      bool found = false;
      for (const auto& [k, v] : order) found = found || k == r;
      // An undeclared required name is an additional property that must be there.
      if (!found && closed)
        error("required property '" + r + "' is not in 'properties' and 'additionalProperties' is false");
      if (!found) order.emplace_back(r, &add);
    }
    // Required properties first (in their declared order), then the optional ones.
    for (int pass = 0; pass < 2; ++pass)
      for (const auto& [k, v] : order) {
        if (required.count(k) != (pass == 0 ? 1u : 0u)) continue;
        names.insert(k);
        const std::string value = visit(*v, name + "-" + k, depth + 1);
        props.push_back({lit(json(k).dump()) + " ws \":\" ws " + value + " ws", pass == 0});
      }
    std::string extra;
    if (!closed) {
      const std::string value = add.is_boolean() ? "json-value" : visit(add, name + "-extra", depth + 1);
      extra = add_rule(name + "-kv", extra_key(s, names, name, depth) + " ws \":\" ws " + value + " ws");
    }
    if (s.contains("patternProperties")) {
      const json& pp = s["patternProperties"];
      if (!pp.is_object()) error("'patternProperties' must be an object");
      if (pp.size() > 1) error("'patternProperties' with more than one pattern is not supported");
      if (!pp.empty()) {
        // Keys outside the pattern would need the regex's complement: only closed objects.
        if (!closed) error("'patternProperties' is supported only with 'additionalProperties': false");
        extra = pattern_key_value(pp.begin().key(), pp.begin().value(), names, name, depth);
      }
    }
    if (s.contains("minProperties") || s.contains("maxProperties")) {
      // Counted only where every key is an extra one (a dict): declared optional properties would
      // make the count depend on which of them are written.
      if (!props.empty()) error("'minProperties' / 'maxProperties' beside 'properties' is not supported");
      const int64_t lo = schema_count(s, "minProperties", 0), hi = schema_count(s, "maxProperties", -1);
      if (hi >= 0 && hi < lo) error("'maxProperties' is below 'minProperties'");
      if (hi > 1000) error("'maxProperties' above 1000 is not supported");
      // The grammar cannot keep keys distinct: a repeated key would count once.
      if (lo > 1) error("'minProperties' above 1 is not supported");
      if (extra.empty() || hi == 0) {
        if (lo > 0) error("'minProperties' asks for keys the object does not allow");
        return "\"{\" ws \"}\"";
      }
      const std::string rest = "(\",\" ws " + extra + "){" + std::to_string(std::max<int64_t>(lo - 1, 0)) + "," +
                               (hi < 0 ? "" : std::to_string(hi - 1)) + "}";
      const std::string body = extra + " " + rest;
      return "\"{\" ws " + (lo == 0 ? "(" + body + ")?" : body) + " \"}\"";
    }
    // after(i): properties i.. once something was written (each preceded by a comma);
    // first(i): the same when nothing was written yet.
    const size_t n = props.size();
    std::vector<std::string> after(n + 1), first(n + 1);
    after[n] = extra.empty() ? "" : "(\",\" ws " + extra + ")*";
    first[n] = extra.empty() ? "" : "(" + extra + " " + after[n] + ")?";
    for (size_t i = n; i-- > 0;) {
      const std::string tail = after[i + 1].empty() ? "" : " " + after[i + 1];
      after[i] = props[i].required ? "\",\" ws " + props[i].kv + tail
                                   : "(\",\" ws " + props[i].kv + ")?" + tail;
      after[i] = add_rule(name + "-after", after[i].empty() ? "\"\"" : after[i]);
      if (props[i].required)
        first[i] = props[i].kv + " " + after[i + 1];
      else
        first[i] = "(" + props[i].kv + " " + after[i + 1] + " | " + (first[i + 1].empty() ? "\"\"" : first[i + 1]) + ")";
      first[i] = add_rule(name + "-first", first[i]);
    }
    return "\"{\" ws " + (first[0].empty() ? "" : first[0] + " ") + "\"}\"";
  }

  // key: value for the keys matching `pattern` (unanchored, as JSON Schema reads it). No declared
  // property may match it: such a key would owe both schemas.
  std::string pattern_key_value(const std::string& pattern, const json& value, const std::set<std::string>& names,
                                const std::string& name, int depth) {
    RegexOptions o;
    o.json_string = o.search = true;
    const std::string key = "\"\\\"\" " + regex_to_gbnf(pattern, o) + " \"\\\"\"";
    const Grammar g = compile_gbnf("root ::= " + key + "\n" + kPrimitives);
    for (const auto& k : names) {
      // The regex writes a control character as \u00XX where the JSON dump writes \n: try both.
      std::string as_regex = "\"";
      for (const char c : k) {
        char buf[8];
        std::snprintf(buf, sizeof buf, "\\u%04x", unsigned(uint8_t(c)) & 0x1F);
        as_regex += uint8_t(c) < 0x20 ? std::string(buf) : c == '"' || c == '\\' ? std::string("\\") + c : std::string(1, c);
      }
      for (const std::string& text : {json(k).dump(), as_regex + "\""}) {
        Matcher m(g);
        if (m.accept_bytes(text) && m.can_end())
          error("'patternProperties' pattern '" + pattern + "' matches the declared property '" + k + "'");
      }
    }
    return add_rule(name + "-pkv", key + " ws \":\" ws " + visit(value, name + "-pattern", depth + 1) + " ws");
  }

  // A JSON string that decodes to none of `names`. An extra key spelled with escapes ("\u0061")
  // would otherwise be a declared name that skips its schema or repeats it: the grammar keeps
  // every spelling of a declared name out of the additional-properties path.
  std::string other_key(const std::set<std::string>& names) {
    return json_key_except_gbnf(names, add_rule_);
  }

  // The key of an extra property: any string but the declared names, or, for a dict (no declared
  // names), a string of the propertyNames schema.
  std::string extra_key(const json& s, const std::set<std::string>& names, const std::string& name, int depth) {
    if (!s.contains("propertyNames")) return other_key(names);
    if (!names.empty()) error("'propertyNames' beside 'properties' is not supported");
    json key = s["propertyNames"];
    if (key.is_boolean() && key.get<bool>()) return "json-string";
    if (!key.is_object()) error("'propertyNames' must be a schema object");
    if (key.contains("type") && key["type"] != "string") error("'propertyNames' must describe strings");
    key["type"] = "string";
    return visit(key, name + "-key", depth + 1);
  }

  std::string array_schema(const json& s, const std::string& name, int depth) {
    if (s.contains("uniqueItems")) {
      const json& u = s["uniqueItems"];
      if (!u.is_boolean()) error("'uniqueItems' must be a boolean");
      // Distinct items are not a context-free property: only trivial cases are expressible.
      const int64_t most = schema_count(s, "maxItems", -1);
      if (u.get<bool>() && (most < 0 || most > 1))
        error("'uniqueItems' true is not supported (unless 'maxItems' is at most 1)");
    }
    const int64_t lo = schema_count(s, "minItems", 0), hi = schema_count(s, "maxItems", -1);
    if (hi >= 0 && hi < lo) error("'maxItems' is below 'minItems'");
    if (lo > 1000 || hi > 1000) error("'minItems' / 'maxItems' above 1000 are not supported");
    // Items after the prefix: `items` (false: none), else any value.
    bool more = true;
    std::string item = "json-value";
    if (s.contains("items")) {
      if (s["items"].is_boolean() && !s["items"].get<bool>()) more = false;
      else item = visit(s["items"], name + "-item", depth + 1);
    }
    std::vector<std::string> prefix;
    if (s.contains("prefixItems")) {
      if (!s["prefixItems"].is_array()) error("'prefixItems' must be an array");
      if (s["prefixItems"].size() > 100) error("'prefixItems' with more than 100 schemas is not supported");
      for (size_t i = 0; i < s["prefixItems"].size(); ++i)
        prefix.push_back(visit(s["prefixItems"][i], name + "-p" + std::to_string(i), depth + 1));
    }
    const int64_t n = int64_t(prefix.size());
    if (!more && lo > n) error("'minItems' asks for more items than 'prefixItems' with 'items' false allow");
    const int64_t cap = more ? hi : (hi < 0 ? n : std::min(hi, n));  // most items (-1: no limit)
    if (cap == 0) return "\"[\" ws \"]\"";
    // tail: the items after the prefix, each preceded by a comma.
    std::string tail;
    if (more && (cap < 0 || cap > n)) {
      const int64_t tail_lo = std::max<int64_t>(lo - n, 0);
      tail = "(\",\" ws " + item + " ws){" + std::to_string(tail_lo) + "," + (cap < 0 ? "" : std::to_string(cap - n)) + "}";
    }
    if (n == 0) {  // no prefix: the first item has no comma
      const std::string rest = "(\",\" ws " + item + " ws){" + std::to_string(std::max<int64_t>(lo - 1, 0)) + "," +
                               (cap < 0 ? "" : std::to_string(cap - 1)) + "}";
      const std::string body = item + " ws " + rest;
      return "\"[\" ws " + (lo == 0 ? "(" + body + ")?" : body) + " \"]\"";
    }
    // Prefix items from the last: after item i come items i+1.. (optional past minItems).
    std::string after = tail;
    for (int64_t i = (cap < 0 ? n : std::min(n, cap)) - 1; i >= 0; --i) {  // cap -1: every prefix item
      const std::string here = (i == 0 ? "" : "\",\" ws ") + prefix[size_t(i)] + " ws" + (after.empty() ? "" : " " + after);
      after = i < lo ? here : "(" + here + ")?";
      if (i > 0) after = add_rule(name + "-prefix", after);
    }
    return "\"[\" ws " + after + " \"]\"";
  }

  const json& root_;
  std::string prefix_;
  std::vector<std::string> rules_;
  int parts_ = 0;
  const SchemaDeref deref_ = [this](const json& s) { return resolve(s["$ref"]); };
  const AddRuleFn add_rule_ = [this](const std::string& base, const std::string& body) { return add_rule(base, body); };
  const std::function<void(std::string)> add_rules_ = [this](std::string rules) { rules_.push_back(std::move(rules)); };
  std::map<std::string, std::string> refs_;
};

}  // namespace

std::string json_schema_to_gbnf(const json& schema) {
  return SchemaCompiler(schema, "").run("root") + kPrimitives;
}

std::string json_schema_rules(const json& schema, const std::string& start) {
  return SchemaCompiler(schema, start + "-").run(start);
}

std::string json_primitives_gbnf() { return kPrimitives; }

std::string json_object_gbnf() { return std::string("root ::= json-object\n") + kPrimitives; }

}  // namespace lite_llama::grammar

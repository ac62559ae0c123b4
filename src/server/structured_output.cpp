#include "server/structured_output.h"

#include <cmath>

#include "core/error.h"
#include "grammar/gbnf_parser.h"
#include "grammar/json_schema.h"
#include "grammar/regex_to_gbnf.h"

namespace lite_llama::server {
namespace {

using ojson = nlohmann::ordered_json;

[[noreturn]] void bad(const std::string& param, const std::string& msg) { throw ApiError(400, msg, param); }

std::string from_schema(const std::string& param, const ojson& schema) {
  ojson s = schema;
  if (s.is_string()) {  // vLLM accepts the schema as JSON text too
    s = ojson::parse(schema.get<std::string>(), nullptr, false);
    if (s.is_discarded()) bad(param, "'" + param + "' is not a valid JSON Schema document");
  }
  try {
    return grammar::json_schema_to_gbnf(s);
  } catch (const Error& e) {
    bad(param, std::string("'") + param + "': " + e.what());
  }
}

std::string from_choices(const std::string& param, const ojson& c) {
  if (!c.is_array() || c.empty()) bad(param, "'" + param + "' must be a non-empty list of strings");
  std::string out = "root ::= ";
  for (size_t i = 0; i < c.size(); ++i) {
    if (!c[i].is_string()) bad(param, "'" + param + "' must be a non-empty list of strings");
    out += (i ? " | \"" : "\"") + grammar::gbnf_escape(c[i].get<std::string>()) + "\"";
  }
  return out + "\n";
}

std::string from_string(const std::string& param, const ojson& v, bool regex) {
  if (!v.is_string()) bad(param, "'" + param + "' must be a string");
  try {
    // An empty grammar is an error (no rules), not the absence of one; an empty regex matches "".
    if (!regex && v.get<std::string>().empty()) grammar::compile_gbnf("");
    return regex ? grammar::regex_grammar(v.get<std::string>()) : v.get<std::string>();
  } catch (const Error& e) {
    bad(param, std::string("'") + param + "': " + e.what());
  }
}

std::string from_response_format(const ojson& f) {
  if (!f.is_object()) bad("response_format", "'response_format' must be an object");
  const std::string type = f.contains("type") && f["type"].is_string() ? f["type"].get<std::string>() : "";
  if (type == "text") return "";
  if (type == "json_object") return grammar::json_object_gbnf();
  if (type != "json_schema")
    bad("response_format", "response_format type must be text, json_object or json_schema, got '" + type + "'");
  if (!f.contains("json_schema") || !f["json_schema"].is_object())
    bad("response_format", "response_format json_schema needs a 'json_schema' object");
  const ojson& js = f["json_schema"];
  if (!js.contains("name") || !js["name"].is_string())
    bad("response_format", "response_format json_schema needs a 'name' string");
  if (js.contains("strict") && !js["strict"].is_boolean() && !js["strict"].is_null())
    bad("response_format", "response_format json_schema 'strict' must be a boolean");
  // Without a schema any JSON value is allowed (as OpenAI does for strict: false).
  if (!js.contains("schema")) return grammar::json_object_gbnf();
  return from_schema("response_format", js["schema"]);
}

void parse_logit_bias(const nlohmann::json& j, OpenAIRequest& r, const RequestLimits& lim) {
  auto it = j.find("logit_bias");
  if (it == j.end() || it->is_null()) return;
  if (!it->is_object()) bad("logit_bias", "'logit_bias' must be an object of token id -> bias");
  if (it->size() > 1024) bad("logit_bias", "at most 1024 logit_bias entries");
  for (const auto& [k, v] : it->items()) {
    char* end = nullptr;
    const long long id = std::strtoll(k.c_str(), &end, 10);
    if (k.empty() || *end != '\0' || id < 0 || id >= lim.vocab_size)
      bad("logit_bias", "logit_bias key '" + k.substr(0, 40) + "' is not a token id of this model");
    if (!v.is_number() || !std::isfinite(v.get<double>()) || std::fabs(v.get<double>()) > 100)
      bad("logit_bias", "logit_bias values must be numbers in [-100, 100]");
    r.params.logit_bias.emplace_back(int32_t(id), v.get<float>());
  }
}

}  // namespace

void parse_structured_output(std::string_view body, const nlohmann::json& j, OpenAIRequest& r,
                             const RequestLimits& lim) {
  parse_logit_bias(j, r, lim);
  static const char* keys[] = {"response_format", "guided_json", "guided_regex", "guided_choice",
                               "guided_grammar", "structured_outputs"};
  bool any = false;
  for (const char* k : keys) any = any || (j.contains(k) && !j[k].is_null());
  if (j.contains("guided_whitespace_pattern") && !j["guided_whitespace_pattern"].is_null())
    bad("guided_whitespace_pattern", "'guided_whitespace_pattern' is not supported");
  if (!any) return;
  const ojson o = ojson::parse(body, nullptr, false);  // key order kept
  std::string gbnf, from;
  auto set = [&](const std::string& param, std::string g) {
    if (g.empty()) return;
    if (!gbnf.empty()) bad(param, "'" + param + "' and '" + from + "' both constrain the output; give one");
    gbnf = std::move(g);
    from = param;
  };
  for (const char* k : keys) {
    if (!o.contains(k) || o[k].is_null()) continue;
    const std::string key = k;
    const ojson& v = o[k];
    if (key == "response_format") set(key, from_response_format(v));
    if (key == "guided_json") set(key, from_schema(key, v));
    if (key == "guided_regex") set(key, from_string(key, v, true));
    if (key == "guided_choice") set(key, from_choices(key, v));
    if (key == "guided_grammar") set(key, from_string(key, v, false));
    if (key == "structured_outputs") {
      if (!v.is_object()) bad(key, "'structured_outputs' must be an object");
      for (const auto& [sk, sv] : v.items()) {
        const std::string p = "structured_outputs." + sk;
        if (sv.is_null()) continue;
        if (sk == "json") set(p, from_schema(p, sv));
        else if (sk == "regex") set(p, from_string(p, sv, true));
        else if (sk == "choice") set(p, from_choices(p, sv));
        else if (sk == "grammar") set(p, from_string(p, sv, false));
        else if (sk == "json_object") set(p, sv == true ? grammar::json_object_gbnf() : "");
        else bad(p, "'" + p + "' is not supported");
      }
    }
  }
  if (gbnf.empty()) return;
  try {
    grammar::compile_gbnf(gbnf);
  } catch (const Error& e) {
    bad(from, std::string("'") + from + "': " + e.what());
  }
  r.params.grammar = std::move(gbnf);
}

}  // namespace lite_llama::server

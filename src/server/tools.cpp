#include "server/tools.h"

#include "core/error.h"

namespace lite_llama::server {
namespace {

using ojson = nlohmann::ordered_json;

[[noreturn]] void bad(const std::string& param, const std::string& msg) { throw ApiError(400, msg, param); }

// {"type": "function", ...}; value("type", "") would throw (a 500) on a "type" that is no string.
template <class Json>
bool function_typed(const Json& o) {
  return o.is_object() && o.contains("type") && o["type"] == "function";
}

}  // namespace

void parse_tools(std::string_view body, const nlohmann::json& j, OpenAIRequest& r) {
  // An empty list is no tools, as null is (some clients always send the field).
  const bool has_tools =
      j.contains("tools") && !j["tools"].is_null() && !(j["tools"].is_array() && j["tools"].empty());
  if (j.contains("parallel_tool_calls") && !j["parallel_tool_calls"].is_null()) {
    if (!j["parallel_tool_calls"].is_boolean()) bad("parallel_tool_calls", "'parallel_tool_calls' must be a boolean");
    r.parallel_tool_calls = j["parallel_tool_calls"].get<bool>();
  }
  std::string choice = has_tools ? "auto" : "none";
  std::string named;
  if (j.contains("tool_choice") && !j["tool_choice"].is_null()) {
    const auto& c = j["tool_choice"];
    if (c.is_string()) {
      choice = c.get<std::string>();
      if (choice != "none" && choice != "auto" && choice != "required")
        bad("tool_choice", "'tool_choice' must be none, auto, required or a function, got '" + choice + "'");
    } else if (function_typed(c) && c.contains("function") &&
               c["function"].is_object() && c["function"].contains("name") && c["function"]["name"].is_string()) {
      choice = "named";
      named = c["function"]["name"].get<std::string>();
    } else {
      bad("tool_choice", "'tool_choice' must be a string or {\"type\": \"function\", \"function\": {\"name\": ...}}");
    }
    if (choice != "none" && !has_tools) bad("tool_choice", "'tool_choice' needs 'tools'");
  }
  if (!has_tools) return;
  if (r.endpoint != Endpoint::Chat) bad("tools", "'tools' is supported on /v1/chat/completions only");
  const ojson o = ojson::parse(body, nullptr, false);  // key order kept for the schemas
  const ojson& tools = o["tools"];
  if (!tools.is_array()) bad("tools", "'tools' must be a list");
  if (tools.size() > 128) bad("tools", "at most 128 tools");
  bool found = choice != "named";  // a named "" is no tool either
  for (const auto& t : tools) {
    if (!function_typed(t) || !t.contains("function") || !t["function"].is_object())
      bad("tools", "every tool must be {\"type\": \"function\", \"function\": {...}}");
    const ojson& fn = t["function"];
    if (!fn.contains("name") || !fn["name"].is_string() || fn["name"].get<std::string>().empty())
      bad("tools", "every function needs a 'name'");
    if (fn.contains("parameters") && !fn["parameters"].is_object())
      bad("tools", "function '" + fn["name"].get<std::string>() + "': 'parameters' must be an object");
    found = found || fn["name"] == named;
  }
  if (!found) bad("tool_choice", "tool_choice names '" + named + "', which is not among the tools");
  r.tool_choice = choice == "named" ? named : choice;
  if (choice == "none") return;
  r.tools_json = tools.dump();
  if (choice == "auto") return;
  if (!r.params.grammar.empty()) bad("tool_choice", "'tool_choice' " + choice + " and a response format both constrain the output; give one");
  // The calls' grammar depends on the model's format: tool_choice_grammar builds it later.
}

void tool_choice_grammar(OpenAIRequest& r, ToolFormat f) {
  if (r.tool_choice == "none" || r.tool_choice == "auto" || r.tools_json.empty()) return;
  const ojson tools = ojson::parse(r.tools_json);
  try {
    r.params.grammar = tool_calls_grammar(f, tools, r.tool_choice == "required" ? "" : r.tool_choice,
                                          r.parallel_tool_calls);
  } catch (const Error& e) {
    bad("tools", e.what());
  }
}

std::vector<std::string> tool_names(const OpenAIRequest& r) {
  std::vector<std::string> out;
  if (r.tools_json.empty()) return out;
  for (const auto& t : ojson::parse(r.tools_json)) out.push_back(t["function"]["name"].get<std::string>());
  return out;
}

std::string tools_system_prompt(const std::string& tools_json) {
  std::string out =
      "You may call one or more functions to assist with the user query.\n\n"
      "You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n";
  for (const auto& t : ojson::parse(tools_json)) out += t.dump() + "\n";
  out += "</tools>\n\nFor each function call, return a json object with function name and arguments "
         "within <tool_call></tool_call> XML tags:\n<tool_call>\n"
         "{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call>";
  return out;
}

}  // namespace lite_llama::server

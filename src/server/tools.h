// Tool calling in the Hermes / Qwen style: the model writes each call as
//   <tool_call>
//   {"name": "get_weather", "arguments": {"city": "Paris"}}
//   </tool_call>
// This file reads `tools` / `tool_choice` / `parallel_tool_calls`, writes the grammar that
// `required` and named choices decode under (arguments always match the parameters' schema),
// and the system prompt for chat templates that do not render tools themselves.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "server/openai_request.h"

namespace lite_llama::server {

// Reads the tool fields of a chat request into r (tools_json, tool_choice, parallel_tool_calls)
// and, for `required` or a named function, sets r.params.grammar. Throws ApiError 400.
void parse_tools(std::string_view body, const nlohmann::json& j, OpenAIRequest& r);

// A system prompt that lists the tools (tools_json) and the call format.
std::string tools_system_prompt(const std::string& tools_json);

}  // namespace lite_llama::server

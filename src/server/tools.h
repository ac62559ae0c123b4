// The tool fields of a chat request: reads `tools` / `tool_choice` / `parallel_tool_calls`,
// sets the grammar that `required` and named choices decode under (in the model's call format,
// server/tool_formats.h; arguments always match the parameters' schema), and writes the
// system prompt for chat templates that do not render tools themselves.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "server/openai_request.h"
#include "server/tool_formats.h"

namespace lite_llama::server {

// Reads the tool fields of a chat request into r (tools_json, tool_choice, parallel_tool_calls)
// Throws ApiError 400.
void parse_tools(std::string_view body, const nlohmann::json& j, OpenAIRequest& r);

// For `required` or a named function: r.params.grammar, the calls in format f. Throws ApiError
// 400 (param "tools") when a function's parameters cannot be expressed.
void tool_choice_grammar(OpenAIRequest& r, ToolFormat f);

// The declared functions' names.
std::vector<std::string> tool_names(const OpenAIRequest& r);

// A system prompt that lists the tools (tools_json) and the call format.
std::string tools_system_prompt(const std::string& tools_json);

}  // namespace lite_llama::server

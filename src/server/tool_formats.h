// The ways chat models write tool calls, picked from the model's own chat template:
//   Hermes / Qwen:  <tool_call>\n{"name": "f", "arguments": {...}}\n</tool_call>   (one block per call)
//   Llama 3.1/3.2:  {"name": "f", "parameters": {...}}   (the whole answer; <|python_tag|> optional)
//   Mistral:        [TOOL_CALLS] [{"name": "f", "arguments": {...}}, ...]
// For each: how an answer that opens calls starts, how the calls parse back, and the grammar that
// `required` / named tool choices decode under.
#pragma once
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "lite_llama/chat.h"

namespace lite_llama::server {

struct ToolCall {
  std::string id, name, arguments;  // arguments: JSON text
};

enum class ToolFormat { Hermes, Llama3Json, Mistral };
const char* tool_format_name(ToolFormat f);

// Renders a probe conversation (a call and its result) with render(messages, extra_json) and
// picks the format the template writes the call in. A template that writes none (or fails)
// gets Hermes: the server then lists the tools in a system prompt of its own.
using ProbeRender = std::function<std::string(const std::vector<ChatMessage>&, const std::string&)>;
ToolFormat detect_tool_format(const ProbeRender& render);

// A fresh call id in the form the format's templates accept (Mistral's: 9 letters and digits).
std::string new_tool_call_id(ToolFormat f);

// For the formats whose calls are the whole answer (Llama3Json, Mistral): whether an answer
// beginning with `start` (leading whitespace removed) opens tool calls: 1 yes, 0 no, -1 not
// known yet (a prefix of an opening).
int opens_tool_calls(ToolFormat f, std::string_view start);

// The calls written in `text` (from the opening on), or nullopt when it is not a well-formed
// list of calls; names: the declared tools (a call to another name is not a call).
std::optional<std::vector<ToolCall>> parse_tool_calls(ToolFormat f, std::string_view text,
                                                      const std::vector<std::string>& names);

// GBNF for tool_choice `required` (named empty) or a named function: only calls, in the
// format, with arguments that follow each function's parameters. parallel: up to 8 calls
// (Llama 3 templates take one call per message, so that format writes one). Throws
// lite_llama::Error naming the tool whose parameters cannot be expressed.
std::string tool_calls_grammar(ToolFormat f, const nlohmann::ordered_json& tools, const std::string& named,
                               bool parallel);

}  // namespace lite_llama::server

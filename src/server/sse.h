// Server-sent events as OpenAI streams them: one `data: <json>` event per chunk, `[DONE]` last.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

namespace lite_llama::server {

std::string sse_event(const nlohmann::json& chunk);  // "data: {...}\n\n"
std::string sse_done();                              // "data: [DONE]\n\n"

}  // namespace lite_llama::server

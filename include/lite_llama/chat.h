// Public: one turn of a conversation, as chat templates see it.
#pragma once
#include <string>

namespace lite_llama {

struct ChatMessage {
  std::string role;
  std::string content;
  std::string reasoning_content;  // optional (Qwen3 thinking of earlier turns)
  std::string tool_calls;         // assistant: OpenAI's tool_calls list as JSON text ("" none)
  std::string tool_call_id;       // role "tool": the call this message answers
};

}  // namespace lite_llama

// Public: one turn of a conversation, as chat templates see it.
#pragma once
#include <string>

namespace lite_llama {

struct ChatMessage {
  std::string role;
  std::string content;
  std::string reasoning_content;  // optional (Qwen3 thinking of earlier turns)
};

}  // namespace lite_llama

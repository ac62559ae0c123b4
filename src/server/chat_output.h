// Splits a chat answer as it streams: a leading <think>...</think> block goes to
// reasoning_content, <tool_call>...</tool_call> blocks (Hermes / Qwen style) become tool calls,
// the rest is content. Text that may be the start of a tag is held back until it is known.
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace lite_llama::server {

struct ToolCall {
  std::string id, name, arguments;  // arguments: JSON text
};

class ChatOutputParser {
 public:
  // reasoning: the answer may open with <think> (or, with in_think, the prompt already did);
  // tools: look for tool calls.
  ChatOutputParser(bool reasoning, bool in_think, bool tools);

  struct Delta {
    std::string content, reasoning;
  };
  Delta push(std::string_view text);
  // The end of the output: flushes what was held back and parses the tool calls. Blocks that
  // are not valid calls are returned as content.
  Delta finish();
  const std::vector<ToolCall>& tool_calls() const { return calls_; }

 private:
  enum class State { Start, Think, Content, Tools };
  void step(Delta& d, bool final);

  bool tools_;
  bool trim_ = false;  // drop whitespace at the start of the content
  State state_;
  std::string buf_;  // not yet emitted
  std::string tool_text_;
  std::vector<ToolCall> calls_;
};

}  // namespace lite_llama::server

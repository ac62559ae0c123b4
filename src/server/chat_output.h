// Splits a chat answer as it streams: a leading <think>...</think> block goes to
// reasoning_content, tool calls in the model's format (server/tool_formats.h) become tool calls,
// the rest is content. Text that may be the start of a tag is held back until it is known.
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "server/tool_formats.h"

namespace lite_llama::server {

class ChatOutputParser {
 public:
  // reasoning: the answer may open with <think> (or, with in_think, the prompt already did);
  // tools: look for tool calls written in `format` to the functions `names`; forced_calls: the
  // answer is written under a grammar of calls (tool_choice required or named); parallel: false
  // keeps the first call only (parallel_tool_calls false).
  ChatOutputParser(bool reasoning, bool in_think, bool tools, ToolFormat format = ToolFormat::Hermes,
                   std::vector<std::string> names = {}, bool forced_calls = false, bool parallel = true);

  struct Delta {
    std::string content, reasoning;
  };
  Delta push(std::string_view text);
  // The end of the output: flushes what was held back and parses the tool calls. Blocks that
  // are not valid calls are returned as content, except under forced calls: there what does not
  // parse is a call that max_tokens or a stop string cut short, markup, not content.
  Delta finish();
  const std::vector<ToolCall>& tool_calls() const { return calls_; }

 private:
  enum class State { Start, Think, Content, Tools };
  void step(Delta& d, bool final);

  bool tools_;
  bool forced_calls_;
  bool parallel_;
  ToolFormat format_;
  std::vector<std::string> names_;
  bool answer_start_ = true;  // nothing of the answer emitted yet (the JSON formats open there)
  bool trim_ = false;  // drop whitespace at the start of the content
  State state_;
  std::string buf_;  // not yet emitted
  std::string tool_text_;
  std::vector<ToolCall> calls_;
};

}  // namespace lite_llama::server

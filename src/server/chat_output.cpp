#include "server/chat_output.h"


namespace lite_llama::server {
namespace {

constexpr std::string_view kThinkOpen = "<think>", kThinkClose = "</think>";
constexpr std::string_view kCallOpen = "<tool_call>";

// Length of the longest suffix of s that is a proper prefix of tag (held back: may grow into it).
size_t partial_tag(std::string_view s, std::string_view tag) {
  for (size_t n = std::min(s.size(), tag.size() - 1); n > 0; --n)
    if (s.substr(s.size() - n) == tag.substr(0, n)) return n;
  return 0;
}

}  // namespace

ChatOutputParser::ChatOutputParser(bool reasoning, bool in_think, bool tools, ToolFormat format,
                                   std::vector<std::string> names, bool forced_calls, bool parallel)
    : tools_(tools), forced_calls_(forced_calls), parallel_(parallel), format_(format), names_(std::move(names)), state_(in_think ? State::Think : reasoning ? State::Start : State::Content) {}

ChatOutputParser::Delta ChatOutputParser::push(std::string_view text) {
  buf_ += text;
  Delta d;
  step(d, false);
  return d;
}

void ChatOutputParser::step(Delta& d, bool final) {
  for (;;) {
    switch (state_) {
      case State::Start: {
        const size_t ws = buf_.find_first_not_of(" \t\r\n");
        if (ws == std::string::npos) {
          if (!final) return;
          state_ = State::Content;
          continue;
        }
        const std::string_view rest = std::string_view(buf_).substr(ws);
        if (rest.substr(0, kThinkOpen.size()) == kThinkOpen) {
          buf_.erase(0, ws + kThinkOpen.size());
          state_ = State::Think;
        } else if (!final && kThinkOpen.substr(0, rest.size()) == rest) {
          return;  // may still become <think>
        } else {
          state_ = State::Content;
        }
        continue;
      }
      case State::Think: {
        const size_t end = buf_.find(kThinkClose);
        if (end != std::string::npos) {
          d.reasoning += buf_.substr(0, end);
          buf_.erase(0, end + kThinkClose.size());
          trim_ = true;
          state_ = State::Content;
          continue;
        }
        const size_t hold = final ? 0 : partial_tag(buf_, kThinkClose);
        d.reasoning += buf_.substr(0, buf_.size() - hold);
        buf_.erase(0, buf_.size() - hold);
        return;
      }
      case State::Content: {
        if (trim_) {  // the blank lines between the thinking and the answer
          const size_t ws = buf_.find_first_not_of(" \t\r\n");
          buf_.erase(0, std::min(ws, buf_.size()));
          if (ws == std::string::npos) return;
          trim_ = false;
        }
        if (tools_ && format_ != ToolFormat::Hermes) {
          // Llama 3 / Mistral calls are the whole answer: decide at its first characters.
          if (answer_start_) {
            const size_t ws = buf_.find_first_not_of(" \t\r\n");
            const int opens = opens_tool_calls(format_, ws == std::string::npos ? "" : std::string_view(buf_).substr(ws));
            if (opens < 0 && !final) return;
            if (opens > 0) {
              tool_text_ = std::move(buf_);
              buf_.clear();
              state_ = State::Tools;
              continue;
            }
            answer_start_ = false;
          }
        } else if (tools_) {
          const size_t at = buf_.find(kCallOpen);
          if (at != std::string::npos) {
            d.content += buf_.substr(0, at);
            tool_text_ = buf_.substr(at);
            buf_.clear();
            state_ = State::Tools;
            continue;
          }
        }
        const size_t hold = final || !tools_ || format_ != ToolFormat::Hermes ? 0 : partial_tag(buf_, kCallOpen);
        d.content += buf_.substr(0, buf_.size() - hold);
        buf_.erase(0, buf_.size() - hold);
        return;
      }
      case State::Tools:
        tool_text_ += buf_;
        buf_.clear();
        return;
    }
  }
}

ChatOutputParser::Delta ChatOutputParser::finish() {
  Delta d;
  step(d, true);
  if (forced_calls_) d.content.clear();  // the start of a tag held back, or of a bare JSON call
  if (state_ != State::Tools) return d;
  // Text that is not a well-formed list of calls stays content (a model that wrote the tag and
  // then something else did not call a tool).
  auto calls = parse_tool_calls(format_, tool_text_, names_);
  if (calls) {
    calls_ = std::move(*calls);
    // Under `auto` the grammar does not stop a second call; OpenAI's (and vLLM's) answer is one.
    if (!parallel_) calls_.resize(1);
  } else if (!forced_calls_) {
    d.content += tool_text_;
  }
  tool_text_.clear();
  return d;
}

}  // namespace lite_llama::server

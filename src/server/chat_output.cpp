#include "server/chat_output.h"

#include <nlohmann/json.hpp>
#include <random>

namespace lite_llama::server {
namespace {

constexpr std::string_view kThinkOpen = "<think>", kThinkClose = "</think>";
constexpr std::string_view kCallOpen = "<tool_call>", kCallClose = "</tool_call>";

// Length of the longest suffix of s that is a proper prefix of tag (held back: may grow into it).
size_t partial_tag(std::string_view s, std::string_view tag) {
  for (size_t n = std::min(s.size(), tag.size() - 1); n > 0; --n)
    if (s.substr(s.size() - n) == tag.substr(0, n)) return n;
  return 0;
}

std::string call_id() {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  static const char* digits = "abcdefghijklmnopqrstuvwxyz0123456789";
  std::string id = "call_";
  for (int i = 0; i < 24; ++i) id += digits[rng() % 36];
  return id;
}

}  // namespace

ChatOutputParser::ChatOutputParser(bool reasoning, bool in_think, bool tools)
    : tools_(tools), state_(in_think ? State::Think : reasoning ? State::Start : State::Content) {}

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
        if (tools_) {
          const size_t at = buf_.find(kCallOpen);
          if (at != std::string::npos) {
            d.content += buf_.substr(0, at);
            tool_text_ = buf_.substr(at);
            buf_.clear();
            state_ = State::Tools;
            continue;
          }
        }
        const size_t hold = final || !tools_ ? 0 : partial_tag(buf_, kCallOpen);
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
  if (state_ != State::Tools) return d;
  // <tool_call>{json}</tool_call> blocks separated by whitespace; anything else keeps the whole
  // text as content (a model that wrote the tag and then something else did not call a tool).
  std::vector<ToolCall> calls;
  size_t i = 0;
  bool ok = true;
  while (ok) {
    i = tool_text_.find_first_not_of(" \t\r\n", i);
    if (i == std::string::npos) break;
    if (tool_text_.compare(i, kCallOpen.size(), kCallOpen) != 0) {
      ok = false;
      break;
    }
    const size_t end = tool_text_.find(kCallClose, i);
    // A call cut short by max_tokens has no closing tag: parse what there is.
    const size_t body_end = end == std::string::npos ? tool_text_.size() : end;
    const auto j = nlohmann::ordered_json::parse(tool_text_.substr(i + kCallOpen.size(), body_end - i - kCallOpen.size()),
                                         nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("name") || !j["name"].is_string()) {
      ok = false;
      break;
    }
    const nlohmann::ordered_json args = j.contains("arguments") ? j["arguments"] : nlohmann::ordered_json::object();
    calls.push_back({call_id(), j["name"].get<std::string>(), args.is_string() ? args.get<std::string>() : args.dump()});
    i = end == std::string::npos ? tool_text_.size() : end + kCallClose.size();
  }
  if (!ok || calls.empty()) {
    d.content += tool_text_;
  } else {
    calls_ = std::move(calls);
  }
  tool_text_.clear();
  return d;
}

}  // namespace lite_llama::server

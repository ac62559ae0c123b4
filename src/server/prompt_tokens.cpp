#include "server/prompt_tokens.h"

#include <fmt/format.h>

#include <algorithm>

#include <nlohmann/json.hpp>

#include <cctype>
#include <string_view>

#include "core/error.h"
#include "server/tools.h"

namespace lite_llama::server {
namespace {

// A prefix may tokenize to a few more tokens than the same bytes inside the whole text (its
// last word is cut); past this margin the whole text cannot fit either.
constexpr int64_t kMargin = 32;
// Ordinary text has fewer bytes per token; the prefix grows from there.
constexpr size_t kFirstBytesPerToken = 8;

// The largest n' <= n that does not cut a UTF-8 character.
size_t utf8_floor(std::string_view s, size_t n) {
  while (n > 0 && n < s.size() && (uint8_t(s[n]) & 0xC0) == 0x80) --n;
  return n;
}

}  // namespace

void refuse_if_longer_than_context(const Engine& eng, std::string_view text, bool parse_special,
                                   const RequestLimits& limits, const char* param) {
  const size_t ctx = size_t(std::max<int64_t>(limits.ctx, 1));
  for (size_t cut = ctx * kFirstBytesPerToken; cut < text.size(); cut *= 4) {
    const size_t n = eng.tokenize(text.substr(0, utf8_floor(text, cut)), false, parse_special).size();
    if (int64_t(n) >= limits.ctx + kMargin)
      throw ApiError(400,
                     fmt::format("This model's maximum context length is {} tokens, but the {} has "
                                 "more than {} tokens.",
                                 limits.ctx, param, n - kMargin),
                     param, "context_length_exceeded");
  }
}

namespace {

// Tools go to the template as its `tools` variable; a template that does not show them (its
// prompt is the same with and without them) gets them in a system message instead. Looking for
// the first tool's name in the prompt took a message that names the tool for the template
// showing them, and the model never saw the tools.
void add_tools(const Engine& eng, const OpenAIRequest& r, std::vector<ChatMessage>& msgs, std::string& kwargs) {
  auto extra = kwargs.empty() ? nlohmann::ordered_json::object() : nlohmann::ordered_json::parse(kwargs, nullptr, false);
  if (!extra.is_object()) return;  // the template call reports it
  const std::string without = eng.apply_chat_template(msgs, r.add_generation_prompt, kwargs);
  extra["tools"] = nlohmann::ordered_json::parse(r.tools_json);
  kwargs = extra.dump();
  if (eng.apply_chat_template(msgs, r.add_generation_prompt, kwargs) != without) return;
  const std::string sys = tools_system_prompt(r.tools_json);
  if (!msgs.empty() && msgs[0].role == "system")
    msgs[0].content += "\n\n" + sys;
  else
    msgs.insert(msgs.begin(), ChatMessage{"system", sys, "", "", ""});
}

}  // namespace

std::vector<int32_t> prompt_tokens(const Engine& eng, const OpenAIRequest& r,
                                   const RequestLimits& limits, const PromptPolicy& policy,
                                   ChatPromptInfo* info, size_t which) {
  const bool chat = r.endpoint == Endpoint::Chat;
  if (!chat && r.prompts.at(which).is_tokens) return r.prompts[which].tokens;
  const char* param = chat ? "messages" : "prompt";
  try {
    if (!chat) {
      const std::string& text = r.prompts.at(which).text;
      refuse_if_longer_than_context(eng, text, true, limits, param);
      // Special tokens written in the prompt act as such, as with HF tokenizers and vLLM.
      return eng.tokenize(text, /*add_special=*/true, /*parse_special=*/true);
    }
    // The contents alone bound the rendered prompt from below. Under ctx * kFirstBytesPerToken
    // bytes the check tokenizes nothing, so they are not even joined.
    size_t n_contents = 0;
    for (const ChatMessage& m : r.messages) n_contents += m.content.size() + 1 + m.reasoning_content.size();
    if (n_contents > size_t(std::max<int64_t>(limits.ctx, 1)) * kFirstBytesPerToken) {
      std::string contents;
      contents.reserve(n_contents);
      for (const ChatMessage& m : r.messages) {
        contents += m.content;
        contents += '\n';
        contents += m.reasoning_content;
      }
      refuse_if_longer_than_context(eng, contents, policy.allow_special_in_content, limits, param);
    }
    std::vector<ChatMessage> with_tools;
    std::string kwargs = r.template_kwargs_json;
    if (!r.tools_json.empty()) {
      with_tools = r.messages;
      add_tools(eng, r, with_tools, kwargs);
    }
    const std::vector<ChatMessage>& msgs = r.tools_json.empty() ? r.messages : with_tools;
    std::string text;
    std::vector<int32_t> ids = eng.tokenize_chat(msgs, r.add_generation_prompt, kwargs,
                                                 policy.allow_special_in_content, info ? &text : nullptr,
                                                 r.continue_final_message);
    if (info) {
      while (!text.empty() && std::isspace(uint8_t(text.back()))) text.pop_back();
      info->in_think = text.ends_with("<think>");
      info->think_done = text.ends_with("</think>");
    }
    return ids;
  } catch (const Error& e) {
    // The engine's continue_final_message checks (chat templates) start with its name.
    const bool cont = chat && r.continue_final_message && std::string_view(e.what()).starts_with("continue_final_message");
    throw ApiError(400, e.what(), cont ? "continue_final_message" : param);
  }
}

}  // namespace lite_llama::server

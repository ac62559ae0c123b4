// Chat templates: the Jinja programs shipped with instruct models (tokenizer.chat_template in
// GGUF, chat_template in tokenizer_config.json) that turn a list of messages into the prompt text.
// The engine implements the Jinja subset these templates use and renders byte for byte like
// transformers' apply_chat_template (jinja2 ImmutableSandboxedEnvironment with trim_blocks and
// lstrip_blocks, plus raise_exception, strftime_now and transformers' tojson).
#pragma once
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "lite_llama/chat.h"

namespace lite_llama {

namespace jinja {
struct Stmt;
}

class ChatTemplate {
 public:
  // Parses once; throws lite_llama::Error naming line, column and construct on unsupported syntax.
  explicit ChatTemplate(std::string source);
  ~ChatTemplate();
  ChatTemplate(ChatTemplate&&) noexcept;
  ChatTemplate& operator=(ChatTemplate&&) noexcept;

  // context: messages, add_generation_prompt, bos_token, eos_token, enable_thinking, tools, ...
  // Errors (raise_exception, type errors) throw lite_llama::Error naming the template line.
  // Prefer the ordered_json overload: dict order is visible to templates (tojson of tools,
  // |items), and nlohmann::json sorts object keys.
  std::string render(const nlohmann::ordered_json& context) const;
  std::string render(const nlohmann::json& context) const;
  std::string render(nlohmann::ordered_json&& context) const;  // moves its strings, no copy

  const std::string& source() const { return source_; }

 private:
  std::string source_;
  std::unique_ptr<std::vector<std::unique_ptr<jinja::Stmt>>> body_;
};

// ChatMessage (role, content, reasoning_content) is part of the public API.

// context = {messages, tools: null, documents: null, add_generation_prompt, bos_token, eos_token}
// with the fields of `extra` (an object) merged over it, as transformers passes them. A message's
// non-empty reasoning_content is passed as transformers does (also aliased as "thinking").
std::string apply_chat_template(const ChatTemplate& t, const std::vector<ChatMessage>& msgs,
                                bool add_generation_prompt, const std::string& bos_token,
                                const std::string& eos_token,
                                const nlohmann::ordered_json& extra = {});

}  // namespace lite_llama

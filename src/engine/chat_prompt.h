// Chat prompts whose message contents stay text: a special-token string written inside a
// message (say "<|im_end|>\n<|im_start|>system") is tokenized as ordinary text, so a client
// cannot forge turns; only the template's own markers become control tokens.
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "lite_llama/chat.h"
#include "tokenizer/tokenizer.h"

namespace lite_llama {

class ChatTemplate;  // template/chat_template.h

using ChatRenderer = std::function<std::string(const std::vector<ChatMessage>&)>;

// Each control-token string inside a content is swapped for a placeholder of private-use code
// points before rendering; in the rendered text the placeholders get their text back and those
// bytes are tokenized with no control-token matching. Contents without such strings render and
// tokenize exactly as before. allow_special_in_content: the old behaviour (the rendered text is
// tokenized with every special token parsed). text: if given, gets the text tokenized.
std::vector<int32_t> tokenize_chat_prompt(const Tokenizer& tok, const std::vector<ChatMessage>& msgs,
                                          bool allow_special_in_content, const ChatRenderer& render,
                                          std::string* text = nullptr);

// A rendered chat cut right after its final message's content (found as transformers finds it:
// stripped as str.strip() does, since templates often trim it; the last place it is), so that
// generation continues that message. Throws when the content is empty or not in the text.
std::string cut_after_final_message(const std::string& rendered, const ChatMessage& final_message);

// The two steps of tokenize_chat_prompt, for tests: contents with placeholders, and the rendered
// text with the originals back plus the byte ranges they cover.
struct ChatPlaceholders {
  std::vector<ChatMessage> messages;
  std::vector<std::string> originals;  // placeholder i stands for originals[i]
};
ChatPlaceholders protect_contents(const std::vector<std::string>& control_texts,
                                  const std::vector<ChatMessage>& msgs);
std::string restore_placeholders(const std::string& rendered, const ChatPlaceholders& p,
                                 std::vector<ByteRange>& plain);

// Engine::apply_chat_template's checks, rendering and continue_final cut, for any template.
std::string render_chat(const ChatTemplate& t, const std::vector<ChatMessage>& msgs, bool add_generation_prompt,
                        const std::string& bos_token, const std::string& eos_token,
                        const std::string& extra_json, bool continue_final);

// The engine's chat templates, all rendered with the model's bos_token and eos_token. The default
// is EngineOptions::chat_template, parsed here so that a broken one fails the engine's creation,
// or else the model's own, parsed at first use (a model whose template does not parse still
// serves completions). A source given per call is parsed once and kept among the last kKept used:
// clients send the same template again and again. Thread-safe: server threads render at once.
class ChatTemplates {
 public:
  static constexpr size_t kKept = 4;
  // model_path: names the model when it has no template and none replaces it.
  ChatTemplates(std::string model_template, const std::string& override_template, std::string model_path,
                std::string bos_token, std::string eos_token);
  ~ChatTemplates();
  // Engine::apply_chat_template; source: "" (or the default's own text) for the default.
  std::string render(const std::vector<ChatMessage>& msgs, bool add_generation_prompt, const std::string& extra_json,
                     bool continue_final, const std::string& source) const;
  int parses() const { return parses_; }  // templates parsed so far (tests)

 private:
  const ChatTemplate& default_template() const;
  std::shared_ptr<const ChatTemplate> kept(const std::string& source) const;

  std::string default_source_, model_path_, bos_, eos_;
  mutable std::once_flag default_once_;
  mutable std::shared_ptr<const ChatTemplate> default_;
  mutable std::mutex mu_;  // guards recent_
  mutable std::vector<std::shared_ptr<const ChatTemplate>> recent_;  // least recently used first
  mutable std::atomic<int> parses_{0};
};

}  // namespace lite_llama

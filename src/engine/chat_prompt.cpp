#include "engine/chat_prompt.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <string_view>

#include "core/byte_set.h"
#include "core/error.h"
#include "core/string_trie.h"
#include "template/chat_template.h"
#include "template/jinja_builtins.h"

namespace lite_llama {
namespace {

// Placeholder i is kOpen, i in decimal, kClose. Both are private-use code points that no
// tokenizer gives a meaning; a content's own kOpen/kClose are swapped out too, so no content
// can fake a placeholder.
constexpr std::string_view kOpen = "\xEF\xA3\xBF";   // U+F8FF
constexpr std::string_view kClose = "\xEF\xA3\xBE";  // U+F8FE

// The control texts (the tokenizer's trie) and the two placeholder marks, which count after
// them: the longest match wins, so "<|im_start|>" over a prefix of it.
class PatternIndex {
 public:
  PatternIndex(const std::vector<std::string>& texts, const StringTrie& trie, ByteSet starts)
      : texts_(texts), trie_(trie), starts_(starts) {
    starts_.add(uint8_t(kOpen[0]));
    starts_.add(uint8_t(kClose[0]));
  }
  // Index of the longest pattern at s[pos], or -1.
  int at(std::string_view s, size_t pos) const {
    const int k = trie_.longest_at(s, pos);
    const size_t len = k >= 0 ? texts_[size_t(k)].size() : 0;
    const std::string_view rest = s.substr(pos);
    const int n = int(texts_.size());
    if (kOpen.size() > len && rest.starts_with(kOpen)) return n;
    if (kClose.size() > len && rest.starts_with(kClose)) return n + 1;
    return k;
  }
  std::string_view pattern(int i) const {
    const int n = int(texts_.size());
    return i < n ? std::string_view(texts_[size_t(i)]) : i == n ? kOpen : kClose;
  }
  // The first position >= pos where a pattern may start, or s.size().
  size_t next(std::string_view s, size_t pos) const { return starts_.find(s, pos); }

 private:
  const std::vector<std::string>& texts_;
  const StringTrie& trie_;
  ByteSet starts_;
};

// Replaces every pattern in s by a placeholder; returns whether any was found.
bool protect(const PatternIndex& idx, std::string& s, std::vector<std::string>& originals) {
  std::string out;
  bool any = false;
  size_t copied = 0;
  for (size_t i = idx.next(s, 0); i < s.size(); i = idx.next(s, i)) {
    const int k = idx.at(s, i);
    if (k < 0) {
      ++i;
      continue;
    }
    if (!any) out.reserve(s.size() + 16);
    any = true;
    out.append(s, copied, i - copied);
    out += kOpen;
    out += std::to_string(originals.size());
    out += kClose;
    originals.emplace_back(idx.pattern(k));
    i += idx.pattern(k).size();
    copied = i;
  }
  if (!any) return false;
  out.append(s, copied, std::string::npos);
  s = std::move(out);
  return true;
}

bool has_pattern(const PatternIndex& idx, std::string_view s) {
  for (size_t i = idx.next(s, 0); i < s.size(); i = idx.next(s, i + 1))
    if (idx.at(s, i) >= 0) return true;
  return false;
}

ChatPlaceholders protect_with(const PatternIndex& idx, const std::vector<ChatMessage>& msgs) {
  ChatPlaceholders p;
  p.messages = msgs;
  for (ChatMessage& m : p.messages) {
    protect(idx, m.content, p.originals);
    protect(idx, m.reasoning_content, p.originals);
  }
  return p;
}

}  // namespace

ChatPlaceholders protect_contents(const std::vector<std::string>& control_texts,
                                  const std::vector<ChatMessage>& msgs) {
  StringTrie trie;
  ByteSet starts;
  for (size_t i = 0; i < control_texts.size(); ++i) {
    trie.add(control_texts[i], int(i));
    if (!control_texts[i].empty()) starts.add(uint8_t(control_texts[i][0]));
  }
  return protect_with(PatternIndex(control_texts, trie, starts), msgs);
}

std::string restore_placeholders(const std::string& rendered, const ChatPlaceholders& p,
                                 std::vector<ByteRange>& plain) {
  std::string out;
  out.reserve(rendered.size());
  size_t i = 0;
  while (i < rendered.size()) {
    const size_t open = rendered.find(kOpen, i);
    if (open == std::string::npos) break;
    out.append(rendered, i, open - i);
    const size_t first = open + kOpen.size();
    size_t j = first, k = 0;
    while (j < rendered.size() && j - first < 12 && rendered[j] >= '0' && rendered[j] <= '9')
      k = k * 10 + size_t(rendered[j++] - '0');
    if (j == first || k >= p.originals.size() || rendered.compare(j, kClose.size(), kClose) != 0) {
      // Not a whole placeholder (a template that cut a content): keep the bytes as they are.
      out += kOpen;
      i = open + kOpen.size();
      continue;
    }
    const std::string& orig = p.originals[k];
    if (orig != kOpen && orig != kClose) plain.push_back({out.size(), out.size() + orig.size()});
    out += orig;
    i = j + kClose.size();
  }
  out.append(rendered, i, std::string::npos);
  return out;
}

std::string cut_after_final_message(const std::string& rendered, const ChatMessage& final_message) {
  const std::string c = jinja::py_strip(final_message.content, jinja::Value::none(), true, true);  // str.strip()
  const size_t at = c.empty() ? std::string::npos : rendered.rfind(c);
  LL_CHECK(at != std::string::npos,
           "continue_final_message: the final message's content is empty or not in the rendered prompt");
  return rendered.substr(0, at + c.size());
}

std::vector<int32_t> tokenize_chat_prompt(const Tokenizer& tok, const std::vector<ChatMessage>& msgs,
                                          bool allow_special_in_content, const ChatRenderer& render,
                                          std::string* text) {
  std::string local;
  std::string& t = text ? *text : local;
  ChatPlaceholders p;
  if (!allow_special_in_content) {
    // Most chats have no special-token text in their contents: then no copy of the messages.
    const PatternIndex idx(tok.control_texts(), tok.control_trie(), tok.control_starts());
    bool any = false;
    for (const ChatMessage& m : msgs)
      any = any || has_pattern(idx, m.content) || has_pattern(idx, m.reasoning_content);
    if (any) p = protect_with(idx, msgs);
  }
  if (p.originals.empty()) {
    t = render(msgs);
    return tok.encode(t, false, true);
  }
  std::vector<ByteRange> plain;
  t = restore_placeholders(render(p.messages), p, plain);
  return tok.encode(t, false, true, plain);
}

// Engine::apply_chat_template's checks, rendering and continue_final cut, for any template.
std::string render_chat(const ChatTemplate& t, const std::vector<ChatMessage>& msgs, bool add_generation_prompt,
                        const std::string& bos_token, const std::string& eos_token,
                        const std::string& extra_json, bool continue_final) {
  if (continue_final) {  // as vLLM; the server and the Python module rely on these checks
    LL_CHECK(!add_generation_prompt,
             "continue_final_message and add_generation_prompt exclude each other: turn add_generation_prompt off");
    LL_CHECK(!msgs.empty() && msgs.back().role == "assistant",
             "continue_final_message needs an assistant message last");
  }
  nlohmann::ordered_json extra = nlohmann::ordered_json::object();
  if (!extra_json.empty()) {
    extra = nlohmann::ordered_json::parse(extra_json, nullptr, false);
    LL_CHECK(extra.is_object(), "chat template variables must be a JSON object");
  }
  const std::string text = apply_chat_template(t, msgs, add_generation_prompt, bos_token, eos_token, extra);
  if (!continue_final) return text;
  return cut_after_final_message(text, msgs.back());
}

ChatTemplates::ChatTemplates(std::string model_template, const std::string& override_template,
                             std::string model_path, std::string bos_token, std::string eos_token)
    : default_source_(override_template.empty() ? std::move(model_template) : override_template),
      model_path_(std::move(model_path)),
      bos_(std::move(bos_token)),
      eos_(std::move(eos_token)) {
  if (override_template.empty()) return;
  try {
    default_ = std::make_shared<const ChatTemplate>(override_template);
  } catch (const Error& e) {
    std::string why = e.what();
    std::replace(why.begin(), why.end(), '\n', ' ');  // the CLI prints one line
    fail("--chat-template: the template does not parse: {}", why);
  }
  ++parses_;
}

ChatTemplates::~ChatTemplates() = default;

const ChatTemplate& ChatTemplates::default_template() const {
  std::call_once(default_once_, [&] {  // a throw leaves it for the next call to try again
    if (default_) return;
    LL_CHECK(!default_source_.empty(), "{}: the model has no chat template (--chat-template gives one)",
             model_path_);
    default_ = std::make_shared<const ChatTemplate>(default_source_);
    ++parses_;
  });
  return *default_;
}

std::shared_ptr<const ChatTemplate> ChatTemplates::kept(const std::string& source) const {
  auto find = [&]() -> std::shared_ptr<const ChatTemplate> {  // with mu_ held; moves it to the back
    for (auto it = recent_.begin(); it != recent_.end(); ++it)
      if ((*it)->source() == source) {
        std::shared_ptr<const ChatTemplate> t = std::move(*it);
        recent_.erase(it);
        return recent_.emplace_back(std::move(t));
      }
    return nullptr;
  };
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (auto t = find()) return t;
  }
  // Parsed outside the lock, so that other threads render meanwhile; a renderer that an eviction
  // overtakes keeps its template alive through its shared_ptr.
  auto t = std::make_shared<const ChatTemplate>(source);
  ++parses_;
  std::lock_guard<std::mutex> lk(mu_);
  if (auto same = find()) return same;  // another thread parsed it meanwhile
  if (recent_.size() >= kKept) recent_.erase(recent_.begin());
  return recent_.emplace_back(std::move(t));
}

std::string ChatTemplates::render(const std::vector<ChatMessage>& msgs, bool add_generation_prompt,
                                  const std::string& extra_json, bool continue_final,
                                  const std::string& source) const {
  if (source.empty() || source == default_source_)
    return render_chat(default_template(), msgs, add_generation_prompt, bos_, eos_, extra_json, continue_final);
  const std::shared_ptr<const ChatTemplate> t = kept(source);
  return render_chat(*t, msgs, add_generation_prompt, bos_, eos_, extra_json, continue_final);
}

}  // namespace lite_llama

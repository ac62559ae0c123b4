// Tokenizer: text <-> token ids. Byte-level BPE (GPT-2 / Llama-3 / Qwen2 / SmolLM kinds) built from
// GGUF metadata (tokenizer.ggml.*), or any BPE tokenizer.json of a HF model directory (also the
// SentencePiece-style BPE of Llama 2 / Mistral); special/added tokens are matched in the text
// before pre-tokenisation when parse_special is set.
#pragma once
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/byte_set.h"
#include "core/string_trie.h"

namespace lite_llama {

namespace gguf {
class File;
}

// Bytes [begin, end) of a text.
struct ByteRange {
  size_t begin = 0, end = 0;
};

// True when [begin, end) overlaps one of `ranges` (sorted by begin, disjoint).
bool overlaps_any(std::span<const ByteRange> ranges, size_t begin, size_t end);

struct TokenizerOptions {
  // Replaces tokenizer.ggml.pre when not empty: tests check one vocabulary against several
  // pre-tokenizers, and a user can repair a GGUF converted with a wrong pre type.
  std::string pre_override;
};

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // Throws lite_llama::Error naming the metadata key at fault.
  static std::unique_ptr<Tokenizer> from_gguf(const gguf::File& f);
  static std::unique_ptr<Tokenizer> from_gguf(const gguf::File& f, const TokenizerOptions& opts);
  // A HF model directory: tokenizer.json (required), tokenizer_config.json (BOS/EOS names,
  // add_bos_token/add_eos_token, chat template) and generation_config.json (eos_token_id, which
  // joins stop_ids). Throws lite_llama::Error naming the file and field at fault.
  static std::unique_ptr<Tokenizer> from_hf_dir(const std::string& dir);

  // add_special: prepend BOS / append EOS when the vocabulary asks for it (GGUF's add_bos_token /
  // add_eos_token); for tokenizer.json the post-processor's template (or tokenizer_config.json's
  // add_bos_token / add_eos_token) decides.
  // parse_special: text like "<|im_start|>" becomes its special token instead of plain text.
  // (Non-special added tokens, such as Qwen3's <think>, always match, as in HF and llama.cpp:
  // tokenizer.json's special=false ones, GGUF's user-defined ones.)
  virtual std::vector<int32_t> encode(std::string_view text, bool add_special,
                                      bool parse_special) const = 0;
  // As above, but no control token matches where its text overlaps one of `plain` (sorted,
  // disjoint): that text is tokenized as ordinary text. Chat prompts mark the special-token
  // strings written inside message contents this way, so that a message cannot forge the
  // template's turn markers.
  virtual std::vector<int32_t> encode(std::string_view text, bool add_special, bool parse_special,
                                      std::span<const ByteRange> plain) const = 0;
  // The texts of the control tokens (what `plain` ranges keep from matching).
  const std::vector<std::string>& control_texts() const;
  // The same in a trie (values: their indices in control_texts()) and their first bytes.
  const StringTrie& control_trie() const;
  const ByteSet& control_starts() const;
  // Concatenated bytes of the tokens (may end in the middle of a UTF-8 character).
  virtual std::string decode(const std::vector<int32_t>& ids, bool skip_special = false) const = 0;
  // Raw bytes one token stands for (byte-level symbols already mapped back to bytes).
  virtual std::string token_bytes(int32_t id) const = 0;
  // The token's string as stored in the vocabulary (e.g. "Ġthe").
  virtual const std::string& token_text(int32_t id) const = 0;
  // -1 when the exact string is not a token.
  virtual int32_t token_id(std::string_view text) const = 0;

  virtual int32_t vocab_size() const = 0;
  virtual bool is_special(int32_t id) const = 0;  // control / user-defined tokens
  // Control tokens only (<|im_end|>, <|eot_id|>): what skip_special drops. User-defined tokens
  // stand for real text and are kept.
  virtual bool is_control(int32_t id) const { return is_special(id); }
  virtual int32_t bos_id() const = 0;             // -1 when absent
  virtual int32_t eos_id() const = 0;
  virtual int32_t eot_id() const = 0;
  virtual int32_t pad_id() const = 0;
  // The unknown token (transformers' unk_token: GGUF's tokenizer.ggml.unknown_token_id,
  // tokenizer_config.json's unk_token); -1 when absent.
  virtual int32_t unk_id() const { return -1; }
  virtual bool add_bos() const = 0;
  // Ids that end generation: eos, eot and (for HF checkpoints) generation_config's eos list.
  virtual std::vector<int32_t> stop_ids() const = 0;

  // Jinja chat template shipped with the tokenizer ("" when there is none): GGUF's
  // tokenizer.chat_template, or tokenizer_config.json's chat_template.
  virtual std::string chat_template() const { return {}; }
  // BOS / EOS as text, for chat templates ("" when absent).
  virtual std::string bos_token() const;
  virtual std::string eos_token() const;

 private:
  mutable std::once_flag control_once_;
  void find_controls() const;
  mutable std::vector<std::string> control_texts_;
  mutable StringTrie control_trie_;
  mutable ByteSet control_starts_;
};

// Turns a stream of token ids into text without ever emitting half a UTF-8 character:
// bytes of an incomplete trailing sequence are held back until the next token completes it.
class StreamingDetokenizer {
 public:
  explicit StreamingDetokenizer(const Tokenizer& tok, bool skip_special = true)
      : tok_(tok), skip_special_(skip_special) {}
  // Text that became complete with this token (possibly empty).
  std::string push(int32_t id);
  // Whatever is held back, with invalid bytes replaced by U+FFFD.
  std::string flush();

 private:
  const Tokenizer& tok_;
  bool skip_special_;
  std::string pending_;
};

}  // namespace lite_llama

// The byte-level BPE Tokenizer (GPT-2, SmolLM, Llama-3, Qwen2 families): special-token
// splitting, then pre-tokenizer regexes, then BPE per piece. Built from a BpeVocab so that
// GGUF metadata and (later) tokenizer.json share one implementation.
#pragma once
#include <memory>

#include "core/byte_set.h"
#include "core/string_trie.h"
#include "tokenizer/bpe.h"
#include "tokenizer/gap_cache.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/tokenizer.h"

namespace lite_llama {

// GGUF's tokenizer.ggml.token_type values (llama.cpp's llama_token_type).
enum class TokenType : int32_t {
  Normal = 1, Unknown = 2, Control = 3, UserDefined = 4, Unused = 5, Byte = 6,
};

// Everything a byte-level BPE tokenizer is built from, whatever file it came from.
struct BpeVocab {
  std::vector<std::string> tokens;   // byte-level strings ("Ġthe")
  std::vector<TokenType> types;      // one per token
  std::vector<std::string> merges;   // "left right", rank order
  std::string merges_key = "merges"; // names the merges' source in errors
  std::string pre = "default";       // PreTokenizer name
  int32_t bos = -1, eos = -1, eot = -1, pad = -1, unk = -1;
  bool add_bos = false;
  bool add_eos = false;  // add_special appends EOS too
  std::string chat_template;
};

class BpeTokenizer final : public Tokenizer {
 public:
  explicit BpeTokenizer(BpeVocab v);

  std::vector<int32_t> encode(std::string_view text, bool add_special,
                              bool parse_special) const override;
  std::vector<int32_t> encode(std::string_view text, bool add_special, bool parse_special,
                              std::span<const ByteRange> plain) const override;
  std::string decode(const std::vector<int32_t>& ids, bool skip_special) const override;
  std::string token_bytes(int32_t id) const override;
  const std::string& token_text(int32_t id) const override;
  int32_t token_id(std::string_view text) const override { return bpe_.find(text); }

  int32_t vocab_size() const override { return bpe_.size(); }
  bool is_special(int32_t id) const override;
  bool is_control(int32_t id) const override;
  int32_t bos_id() const override { return bos_; }
  int32_t eos_id() const override { return eos_; }
  int32_t eot_id() const override { return eot_; }
  int32_t pad_id() const override { return pad_; }
  int32_t unk_id() const override { return unk_; }
  bool add_bos() const override { return add_bos_; }
  std::vector<int32_t> stop_ids() const override;
  std::string chat_template() const override { return chat_template_; }

  const PreTokenizer& pre_tokenizer() const { return *pre_; }

 private:
  void check_id(int32_t id) const;
  // Tokenises text that contains no special token to be parsed.
  void encode_plain(std::string_view text, std::vector<int32_t>& out) const;
  // Id of the longest special token that starts text[pos], or -1.
  int32_t match_special(std::string_view text, size_t pos) const;

  BpeModel bpe_;
  std::unique_ptr<PreTokenizer> pre_;
  std::vector<TokenType> types_;
  std::vector<std::string> bytes_;  // token_bytes, precomputed: decode is on the hot path
  StringTrie specials_;      // control and user-defined tokens (values: ids)
  ByteSet special_starts_;  // their first bytes
  int32_t bos_, eos_, eot_, pad_, unk_;
  bool add_bos_, add_eos_;
  std::string chat_template_;
  GapCache gaps_;  // long texts between special tokens, already encoded
};

}  // namespace lite_llama

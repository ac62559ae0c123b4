// The Tokenizer of a HF tokenizer.json (BPE model): added tokens are matched first, the text
// between them is normalised, pre-tokenised and run through BPE, byte-level (GPT-2, Llama 3,
// Qwen2, SmolLM) or SentencePiece-style (Llama 2, Mistral); the post-processor's template adds
// BOS/EOS; decoding follows the file's decoder chain. Mirrors HF tokenizers' pipeline
// (tokenizers/src/tokenizer/mod.rs) so that ids match exactly.
#pragma once
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "tokenizer/added_tokens.h"
#include "tokenizer/bpe.h"
#include "tokenizer/gap_cache.h"
#include "tokenizer/hf_decoder.h"
#include "tokenizer/hf_pretokenizer.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/sentencepiece_bpe.h"
#include "tokenizer/tokenizer.h"

namespace lite_llama {

// Everything Tokenizer::from_hf_dir reads from a model directory.
struct HfTokenizerParts {
  std::vector<std::string> model_tokens;  // by id; "" where the model has no token
  std::vector<std::string> merges;        // "left right" form, or
  std::vector<std::pair<std::string, std::string>> merge_pairs;  // [left, right] form
  std::string merges_key;                 // names the merges in errors
  SentencePieceOptions model_opts;        // unk, fuse_unk, byte_fallback, ignore_merges
  std::vector<AddedToken> added;
  std::unique_ptr<Normalizer> normalizer;          // null: none
  std::unique_ptr<HfPreTokenizer> pre_tokenizer;   // never null
  std::unique_ptr<HfDecoder> decoder;              // never null
  std::vector<int32_t> prefix, suffix;   // what add_special puts around the text
  int32_t bos = -1, eos = -1, eot = -1, pad = -1, unk = -1;  // unk: tokenizer_config's
  std::vector<int32_t> extra_stop_ids;   // generation_config.json's eos_token_id
  std::string chat_template;
};

class HfTokenizer final : public Tokenizer {
 public:
  explicit HfTokenizer(HfTokenizerParts p);

  std::vector<int32_t> encode(std::string_view text, bool add_special,
                              bool parse_special) const override;
  std::vector<int32_t> encode(std::string_view text, bool add_special, bool parse_special,
                              std::span<const ByteRange> plain) const override;
  std::string decode(const std::vector<int32_t>& ids, bool skip_special) const override;
  std::string token_bytes(int32_t id) const override;
  const std::string& token_text(int32_t id) const override;
  int32_t token_id(std::string_view text) const override;

  int32_t vocab_size() const override { return static_cast<int32_t>(texts_.size()); }
  bool is_special(int32_t id) const override;
  bool is_control(int32_t id) const override;
  int32_t bos_id() const override { return bos_; }
  int32_t eos_id() const override { return eos_; }
  int32_t eot_id() const override { return eot_; }
  int32_t pad_id() const override { return pad_; }
  int32_t unk_id() const override { return unk_; }
  bool add_bos() const override;
  std::vector<int32_t> stop_ids() const override;
  std::string chat_template() const override { return chat_template_; }

  // What add_special adds before and after the text (the post-processor's template).
  const std::vector<int32_t>& prefix_ids() const { return prefix_; }
  const std::vector<int32_t>& suffix_ids() const { return suffix_; }
  bool byte_level() const { return pre_->byte_level(); }

 private:
  enum : uint8_t { kNone = 0, kAdded = 1, kControl = 2 };
  void check_id(int32_t id) const;
  // The text between raw-matched added tokens: normalise, match normalised added tokens,
  // pre-tokenise, BPE.
  // plain: the protected ranges of the gap, relative to its start.
  void encode_gap(std::string_view gap, bool at_origin, bool parse_special,
                  std::span<const ByteRange> plain, std::vector<int32_t>& out) const;
  void encode_normalized(std::string_view text, bool at_origin, std::vector<int32_t>& out) const;

  BpeModel bpe_;
  SentencePieceBpe spm_;
  bool ignore_merges_;
  std::vector<AddedToken> added_;
  AddedTokenMatcher raw_matcher_, normalized_matcher_;
  std::unique_ptr<Normalizer> normalizer_;
  std::unique_ptr<HfPreTokenizer> pre_;
  std::unique_ptr<HfDecoder> decoder_;
  std::vector<std::string> texts_;   // token strings by id, added tokens included
  std::vector<std::string> bytes_;   // token_bytes, precomputed: streaming is on the hot path
  std::vector<uint8_t> kind_;        // kNone / kAdded / kControl by id
  std::unordered_map<std::string, int32_t> added_ids_;
  std::vector<int32_t> prefix_, suffix_;
  int32_t bos_, eos_, eot_, pad_, unk_;
  std::string chat_template_;
  std::vector<int32_t> extra_stops_;
  GapCache gaps_;  // long normalised texts between added tokens, already encoded
};

}  // namespace lite_llama

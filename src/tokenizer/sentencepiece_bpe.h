// SentencePiece-style BPE (Llama 2, Mistral) as HF's BPE model runs it without a ByteLevel
// pre-tokenizer: every UTF-8 character of a piece starts as its own symbol. A character the
// vocabulary lacks becomes its <0xXX> byte tokens (byte_fallback) or the unknown token
// (consecutive unknowns fused into one with fuse_unk); then the ranked merges apply.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/bpe.h"

namespace lite_llama {

struct SentencePieceOptions {
  int32_t unk = -1;  // -1: characters without a token are dropped, as HF does without unk
  bool fuse_unk = false;
  bool byte_fallback = false;
  bool ignore_merges = false;
};

class SentencePieceBpe {
 public:
  // `bpe` must outlive this object.
  SentencePieceBpe(const BpeModel& bpe, const SentencePieceOptions& opts);

  void encode_piece(std::string_view piece, std::vector<int32_t>& out) const;

  // The <0xXX> token of a byte, -1 when the vocabulary has none.
  int32_t byte_token(uint8_t b) const { return byte_ids_[b]; }
  // Parses "<0xXX>" (upper-case hex, as SentencePiece writes it); -1 for any other string.
  static int byte_value(std::string_view token);

 private:
  const BpeModel& bpe_;
  SentencePieceOptions opts_;
  int32_t byte_ids_[256];
};

}  // namespace lite_llama

// Byte-level BPE model: vocabulary lookup and the merge loop over one pre-tokenised piece.
// Merges are applied lowest rank first, leftmost first among equal ranks, like HF's BPE
// (tokenizers/src/models/bpe/word.rs), so ids match HF exactly.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace lite_llama {

class BpeModel {
 public:
  // `tokens` are the token strings by id ("Ġthe" in byte-level vocabularies); an empty string
  // marks an id the vocabulary does not use. `merges` are "left right" in rank order.
  // `merges_key` names the source of the merges in errors (e.g. "tokenizer.ggml.merges").
  BpeModel(std::vector<std::string> tokens, const std::vector<std::string>& merges,
           std::string_view merges_key);
  // Merges as (left, right) pairs: tokenizer.json's newer form, which allows spaces in tokens.
  BpeModel(std::vector<std::string> tokens,
           const std::vector<std::pair<std::string, std::string>>& merges,
           std::string_view merges_key);
  BpeModel(const BpeModel&) = delete;
  BpeModel& operator=(const BpeModel&) = delete;

  int32_t size() const { return static_cast<int32_t>(tokens_.size()); }
  const std::string& token(int32_t id) const { return tokens_[id]; }
  int32_t find(std::string_view text) const;  // -1 when absent
  // Token of a single raw byte, -1 when the vocabulary lacks that byte's symbol.
  int32_t byte_token(uint8_t b) const { return byte_token_[b]; }

  // Appends the ids of one piece of raw bytes. Bytes whose symbol is not a token are dropped,
  // as HF's BPE does when the model has no unk token. With ignore_merges a piece that is a
  // token as a whole maps to it directly (Llama-3).
  void encode_piece(std::string_view bytes, bool ignore_merges, std::vector<int32_t>& out) const;
  // Applies the merges to a sequence of initial symbols (token ids) and appends the result:
  // the merge loop shared by byte-level and character-level (SentencePiece-style) models.
  void merge_ids(const std::vector<int32_t>& ids, std::vector<int32_t>& out) const;

 private:
  struct MergeEntry {
    uint64_t key;  // left id << 32 | right id; kEmpty marks a free slot
    int32_t rank;
    int32_t id;    // the merged token
  };
  static constexpr uint64_t kEmpty = ~uint64_t{0};

  void encode_uncached(std::string_view bytes, bool ignore_merges, std::vector<int32_t>& out) const;
  void init_tokens();
  void reserve_merges(size_t n);
  void add_merge(std::string_view left, std::string_view right, size_t rank,
                 std::string_view merges_key, std::string_view shown);
  void insert_merge(uint64_t key, int32_t rank, int32_t id);
  const MergeEntry* find_merge(int32_t left, int32_t right) const;

  uint64_t uid_;  // tells this model's pieces apart in the per-thread piece cache
  std::vector<std::string> tokens_;
  std::unordered_map<std::string_view, int32_t> index_;  // views into tokens_
  int32_t byte_token_[256];
  // Open addressing with linear probing: the merge lookup is the inner loop of encoding.
  std::vector<MergeEntry> merges_;
  uint64_t mask_ = 0;
};

}  // namespace lite_llama

// Added tokens of a HF tokenizer (tokenizer.json "added_tokens"): strings matched in the text
// before normalisation and pre-tokenisation, the way HF's AddedVocabulary finds them
// (leftmost-longest, then the single_word, lstrip and rstrip flags).
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/byte_set.h"
#include "core/string_trie.h"

namespace lite_llama {

struct ByteRange;

struct AddedToken {
  int32_t id = -1;
  std::string content;
  bool special = false;      // control token: skip_special drops it; parse_special gates it
  bool normalized = false;   // matched in the normalised text instead of the raw text
  bool lstrip = false;       // the match swallows whitespace on its left
  bool rstrip = false;       // ... and on its right
  bool single_word = false;  // matches only between non-word characters
};

// A piece of text: an added token (id >= 0) or the text between two of them (id = -1).
struct TextSegment {
  size_t start, end;
  int32_t id;
};

class AddedTokenMatcher {
 public:
  AddedTokenMatcher() = default;
  // `tokens` must outlive the matcher. Patterns are their content, or `patterns` when given
  // (the normalised content of normalized tokens).
  explicit AddedTokenMatcher(std::vector<const AddedToken*> tokens,
                             std::vector<std::string> patterns = {});

  bool empty() const { return tokens_.empty(); }

  // Splits `text` into segments covering it. With parse_special false a special token's match
  // stays plain text (HF's encode_special_tokens); non-special added tokens still match.
  // No special token matches where it overlaps one of `plain` (sorted, disjoint ranges).
  void split(std::string_view text, bool parse_special, std::vector<TextSegment>& out,
             std::span<const ByteRange> plain = {}) const;

 private:
  // Index of the longest pattern starting at text[pos], or -1.
  int longest_at(std::string_view text, size_t pos) const;

  std::vector<const AddedToken*> tokens_;
  std::vector<std::string> patterns_;
  StringTrie trie_;  // the patterns (values: their indices)
  ByteSet starts_;  // the patterns' first bytes
};

}  // namespace lite_llama

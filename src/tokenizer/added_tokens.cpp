#include "tokenizer/added_tokens.h"

#include <algorithm>

#include "tokenizer/regex.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"

namespace lite_llama {

namespace {

// HF tests single_word with Rust's \w: alphabetic, marks, decimal digits, connector
// punctuation and the joiners.
bool is_word_char(std::string_view ch) {
  static const Regex word(R"([\p{L}\p{Nl}\p{M}\p{Nd}\p{Pc}\x{200C}\x{200D}])", "\\w");
  size_t s = 0, e = 0;
  return word.find(ch, 0, s, e);
}

// Start of the last character of text[0, end), or end when there is none.
size_t last_char_start(std::string_view text, size_t end) {
  if (end == 0) return end;
  size_t b = end - 1;
  while (b > 0 && end - b < 4 && (static_cast<uint8_t>(text[b]) & 0xC0) == 0x80) --b;
  return b;
}

bool white_space_at(std::string_view text, size_t pos, int& len) {
  uint32_t cp = 0;
  len = unicode::decode_utf8(text, pos, cp);
  return len > 0 && unicode::is_white_space(cp);
}

}  // namespace

AddedTokenMatcher::AddedTokenMatcher(std::vector<const AddedToken*> tokens,
                                     std::vector<std::string> patterns)
    : tokens_(std::move(tokens)), patterns_(std::move(patterns)) {
  if (patterns_.empty()) {
    for (const AddedToken* t : tokens_) patterns_.push_back(t->content);
  }
  for (int i = 0; i < static_cast<int>(patterns_.size()); ++i) {
    if (patterns_[i].empty()) continue;
    // Longest first; among equal patterns the first given wins (HF's order: specials first).
    trie_.add(patterns_[i], i);
    starts_.add(static_cast<uint8_t>(patterns_[i][0]));
  }
}

int AddedTokenMatcher::longest_at(std::string_view text, size_t pos) const {
  return trie_.longest_at(text, pos);
}

void AddedTokenMatcher::split(std::string_view text, bool parse_special,
                              std::vector<TextSegment>& out,
                              std::span<const ByteRange> plain) const {
  out.clear();
  size_t seg_start = 0;  // end of the previous match
  for (size_t i = starts_.find(text, 0); i < text.size(); i = starts_.find(text, i)) {
    const int k = longest_at(text, i);
    if (k < 0) {
      ++i;
      continue;
    }
    const AddedToken& tok = *tokens_[k];
    size_t start = i, stop = i + patterns_[k].size();
    i = stop;  // a discarded match is consumed as text, as HF's non-overlapping search does
    if (tok.single_word) {
      const size_t b = last_char_start(text, start);
      const bool left_ok = start == 0 || !is_word_char(text.substr(b, start - b));
      uint32_t cp = 0;
      const int n = stop < text.size() ? std::max(unicode::decode_utf8(text, stop, cp), 1) : 0;
      const bool right_ok = stop == text.size() || !is_word_char(text.substr(stop, n));
      if (!left_ok || !right_ok) continue;
    }
    if (tok.special && (!parse_special || (!plain.empty() && overlaps_any(plain, start, stop))))
      continue;
    if (tok.lstrip) {
      size_t s = start;
      while (s > seg_start) {
        const size_t b = last_char_start(text, s);
        int len = 0;
        if (!white_space_at(text, b, len) || b + len != s) break;
        s = b;
      }
      start = s;
    }
    if (tok.rstrip) {
      int len = 0;
      while (stop < text.size() && white_space_at(text, stop, len)) stop += len;
      i = stop;
    }
    if (start > seg_start) out.push_back(TextSegment{seg_start, start, -1});
    out.push_back(TextSegment{start, stop, tok.id});
    seg_start = stop;
  }
  if (seg_start < text.size()) out.push_back(TextSegment{seg_start, text.size(), -1});
}

}  // namespace lite_llama

// vLLM's bad_words: each word as token ids, and the tokens a step must not pick.
#pragma once
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace lite_llama::sampling {

// Each word tokenized as vLLM's SamplingParams.update_from_tokenizer does: left-stripped, then
// again with a leading space where that gives another first token in as many tokens (so the
// word is banned both at the start of the text and mid-text). encode(text) -> ids, no specials.
template <typename Encode>
std::vector<std::vector<int32_t>> tokenize_bad_words(const std::vector<std::string>& words, Encode&& encode) {
  std::vector<std::vector<int32_t>> out;
  for (const std::string& w : words) {
    const std::string word = w.substr(std::min(w.find_first_not_of(" \t\n\r\f\v"), w.size()));
    std::vector<int32_t> plain = encode(word), spaced = encode(" " + word);
    if (plain.empty()) continue;
    out.push_back(plain);
    if (!spaced.empty() && spaced[0] != plain[0] && spaced.size() == plain.size()) out.push_back(spaced);
  }
  return out;
}

// Calls ban(token) for each word whose tokens but the last end the output so far (a one-token
// word: always), as vLLM's apply_bad_words.
template <typename Ban>
void banned_tokens(const std::vector<std::vector<int32_t>>& words, const int32_t* output, size_t n, Ban&& ban) {
  for (const auto& w : words) {
    const size_t prefix = w.size() - 1;
    if (prefix > n) continue;
    if (std::equal(w.begin(), w.end() - 1, output + (n - prefix))) ban(w.back());
  }
}

}  // namespace lite_llama::sampling

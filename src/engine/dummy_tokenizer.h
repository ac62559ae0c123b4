// Stand-in tokenizer for --load-format dummy without tokenizer files: bytes map to ids, ids
// decode to nothing. Benchmarks feed token ids and ignore the text.
#pragma once
#include <string>

#include "tokenizer/tokenizer.h"

namespace lite_llama {

class DummyTokenizer final : public Tokenizer {
 public:
  explicit DummyTokenizer(int32_t vocab) : vocab_(vocab) {}
  std::vector<int32_t> encode(std::string_view text, bool a, bool p,
                              std::span<const ByteRange>) const override {
    return encode(text, a, p);
  }
  std::vector<int32_t> encode(std::string_view text, bool, bool) const override {
    std::vector<int32_t> ids;
    for (unsigned char c : text) ids.push_back(int32_t(c) % vocab_);
    return ids;
  }
  std::string decode(const std::vector<int32_t>&, bool) const override { return ""; }
  std::string token_bytes(int32_t) const override { return ""; }
  const std::string& token_text(int32_t) const override { return empty_; }
  int32_t token_id(std::string_view) const override { return -1; }
  int32_t vocab_size() const override { return vocab_; }
  bool is_special(int32_t) const override { return false; }
  int32_t bos_id() const override { return -1; }
  int32_t eos_id() const override { return -1; }
  int32_t eot_id() const override { return -1; }
  int32_t pad_id() const override { return -1; }
  bool add_bos() const override { return false; }
  std::vector<int32_t> stop_ids() const override { return {}; }

 private:
  int32_t vocab_;
  std::string empty_;
};

}  // namespace lite_llama

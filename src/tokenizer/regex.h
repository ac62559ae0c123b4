// A compiled PCRE2 pattern for the pre-tokenizers. HF tokenizer.json files write their split
// regexes in Oniguruma syntax, which PCRE2 reads the same way for the patterns of these model
// families; arbitrary bytes may be searched (invalid UTF-8 simply never matches).
#pragma once
#include <cstddef>
#include <string>
#include <string_view>

struct pcre2_real_code_8;

namespace lite_llama {

class Regex {
 public:
  // `what` names the pattern's source in errors. `literal`: the pattern is plain text.
  Regex(std::string_view pattern, std::string_view what, bool literal = false);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // First non-empty match starting at or after `pos`; false when there is none.
  bool find(std::string_view text, size_t pos, size_t& start, size_t& end) const;

 private:
  pcre2_real_code_8* code_ = nullptr;
  std::string what_;
};

}  // namespace lite_llama

// HF normalizers (tokenizer.json "normalizer"): rewrites of the text between added tokens, run
// before pre-tokenisation. Covers what the supported families use: NFC (Qwen2/2.5/3), and
// Prepend("▁") + Replace(" ", "▁") (Llama 2 / Mistral's legacy SentencePiece layout), plus the
// other Unicode forms, Strip and Sequence.
#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/hf_json.h"

namespace lite_llama {

class Regex;

class Normalizer {
 public:
  // `j` is tokenizer.json's "normalizer" value; null gives nullptr (no normalisation).
  // Throws lite_llama::Error naming `where` and the field for unsupported or malformed parts.
  static std::unique_ptr<Normalizer> from_json(const hfjson::json& j, const std::string& where);

  ~Normalizer();
  Normalizer(const Normalizer&) = delete;
  Normalizer& operator=(const Normalizer&) = delete;

  std::string apply(std::string_view text) const;

 private:
  enum class Kind { Nfc, Nfd, Nfkc, Nfkd, Prepend, Replace, Strip };
  struct Step {
    Kind kind;
    std::string text;                // Prepend: the prefix; Replace: the literal pattern
    std::string content;             // Replace: the replacement
    std::unique_ptr<Regex> regex;    // Replace with a Regex pattern
    bool left = false, right = false;  // Strip
  };
  Normalizer() = default;
  void parse(const hfjson::json& j, const std::string& where);
  static void apply_step(const Step& st, std::string& text);

  std::vector<Step> steps_;
};

// Unicode normalisation (ICU) of valid UTF-8; invalid bytes are passed through untouched.
std::string unicode_normalize(std::string_view text, std::string_view form);

}  // namespace lite_llama

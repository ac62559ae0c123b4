// HF decoders (tokenizer.json "decoder"): token strings -> text. ByteLevel, Replace,
// ByteFallback, Fuse, Strip, Metaspace and Sequence, chained as HF's decode_chain does.
//
// Unlike HF, byte-producing steps (ByteLevel, ByteFallback) keep raw bytes instead of replacing
// invalid UTF-8 with U+FFFD: Tokenizer::decode may end inside a character, and the caller
// sanitises (StreamingDetokenizer, unicode::sanitize_utf8).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "tokenizer/hf_json.h"

namespace lite_llama {

class Regex;

class HfDecoder {
 public:
  // `j` is tokenizer.json's "decoder" value; null joins tokens with spaces (HF's fallback).
  static std::unique_ptr<HfDecoder> from_json(const hfjson::json& j, const std::string& where);

  ~HfDecoder();
  HfDecoder(const HfDecoder&) = delete;
  HfDecoder& operator=(const HfDecoder&) = delete;

  // whole_text: the tokens are a complete text, so Strip and Metaspace drop the leading space
  // of its first token. False decodes one token in the middle of a stream (token_bytes).
  std::string decode(std::vector<std::string> tokens, bool whole_text) const;

 private:
  enum class Kind { ByteLevel, Replace, ByteFallback, Fuse, Strip, Metaspace };
  struct Step {
    Kind kind;
    std::string pattern, content;  // Replace (literal pattern); Strip/Metaspace: the character
    std::unique_ptr<Regex> regex;  // Replace with a Regex pattern
    int start = 0, stop = 0;       // Strip
    bool prepend = true;           // Metaspace: prepend_scheme != never
  };
  HfDecoder() = default;
  void parse(const hfjson::json& j, const std::string& where);
  static void run(const Step& st, std::vector<std::string>& tokens, bool whole_text);

  std::vector<Step> steps_;
  bool join_with_spaces_ = false;
};

}  // namespace lite_llama

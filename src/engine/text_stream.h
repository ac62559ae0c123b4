// Per-request output text: streaming detokenisation plus stop strings. Text that might be the
// start of a stop string is held back until it is clear either way, so a stop string never
// reaches the client, not even in part.
#pragma once
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace lite_llama {

class TextStream {
 public:
  // include_stop: the text ends with the stop string met, not right before it; skip_special:
  // control tokens add no text.
  TextStream(const Tokenizer& tok, std::vector<std::string> stops, bool include_stop = false,
             bool skip_special = true);
  // Returns the text that can be emitted now; sets *stopped when a stop string completed
  // (the returned text then ends right before it, or with it: include_stop). Without match_stops
  // (within min_tokens) no stop string ends the text, but the start of one is still held back, so
  // that one ending after min_tokens is found whole (as vLLM).
  std::string push(int32_t token, bool* stopped, bool match_stops = true);
  // Everything still held back (end of generation without a stop string).
  std::string flush();

 private:
  StreamingDetokenizer detok_;
  std::vector<std::string> stops_;
  bool include_stop_;
  std::string held_;
};

}  // namespace lite_llama

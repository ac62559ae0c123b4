#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"

namespace lite_llama {

std::string StreamingDetokenizer::push(int32_t id) {
  if (skip_special_ && tok_.is_control(id)) return {};
  pending_ += tok_.token_bytes(id);
  // Everything up to a trailing, still completable sequence goes out now. Bytes that can never
  // become valid are replaced at once rather than held: waiting would not fix them, and the
  // caller is promised valid UTF-8.
  const size_t n = unicode::complete_prefix_len(pending_);
  std::string out = unicode::sanitize_utf8(std::string_view(pending_).substr(0, n));
  pending_.erase(0, n);
  return out;
}

std::string StreamingDetokenizer::flush() {
  std::string out = unicode::sanitize_utf8(pending_);
  pending_.clear();
  return out;
}

}  // namespace lite_llama

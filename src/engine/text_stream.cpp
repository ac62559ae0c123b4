#include "engine/text_stream.h"

#include <algorithm>

namespace lite_llama {

TextStream::TextStream(const Tokenizer& tok, std::vector<std::string> stops)
    : detok_(tok, /*skip_special=*/true), stops_(std::move(stops)) {}

std::string TextStream::push(int32_t token, bool* stopped, bool match_stops) {
  *stopped = false;
  held_ += detok_.push(token);
  if (stops_.empty() || !match_stops) {
    std::string out;
    out.swap(held_);  // held_ is empty after, which a moved-from string need not be
    return out;
  }
  size_t first = std::string::npos;
  for (const std::string& s : stops_) first = std::min(first, held_.find(s));
  if (first != std::string::npos) {
    *stopped = true;
    std::string out = held_.substr(0, first);
    held_.clear();
    return out;
  }
  // Hold back the longest suffix that is a proper prefix of some stop string.
  size_t keep = 0;
  for (const std::string& s : stops_)
    for (size_t k = std::min(s.size() - 1, held_.size()); k > keep; --k)
      if (held_.compare(held_.size() - k, k, s, 0, k) == 0) {
        keep = k;
        break;
      }
  std::string out = held_.substr(0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
  return out;
}

std::string TextStream::flush() {
  std::string out = held_ + detok_.flush();
  held_.clear();
  return out;
}

}  // namespace lite_llama

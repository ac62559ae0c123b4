#include "engine/text_stream.h"

#include <algorithm>

namespace lite_llama {

TextStream::TextStream(const Tokenizer& tok, std::vector<std::string> stops, bool include_stop, bool skip_special)
    : detok_(tok, skip_special), stops_(std::move(stops)), include_stop_(include_stop) {}

std::string TextStream::push(int32_t token, bool* stopped, bool match_stops) {
  *stopped = false;
  held_ += detok_.push(token);
  if (stops_.empty()) {
    std::string out;
    out.swap(held_);  // held_ is empty after, which a moved-from string need not be
    return out;
  }
  size_t first = std::string::npos, len = 0;  // the earliest stop string met (the longest there)
  for (const std::string& s : stops_)
    if (const size_t at = held_.find(s); at < first || (at == first && at != std::string::npos && s.size() > len))
      first = at, len = s.size();
  if (first != std::string::npos && match_stops) {
    *stopped = true;
    std::string out = held_.substr(0, first + (include_stop_ ? len : 0));
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

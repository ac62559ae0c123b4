// The ids of long runs of text between special tokens, kept across encode() calls. A chat's
// history comes back rendered each turn: its system prompt and earlier messages are the same
// gaps again, so a turn encodes only what is new instead of its whole history (O(history) BPE
// on every request otherwise). Keyed by the gap's bytes and one flag; thread-safe.
#pragma once
#include <cstddef>
#include <cstdint>
#include <list>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace lite_llama {

class GapCache {
 public:
  // Shorter gaps are cheap to encode (the BPE piece cache covers their words).
  static constexpr size_t kMinBytes = 256;

  GapCache() = default;
  GapCache(const GapCache&) = delete;
  GapCache& operator=(const GapCache&) = delete;

  // Appends the cached ids of (gap, flag) to out; false when absent.
  bool append(std::string_view gap, bool flag, std::vector<int32_t>& out) const;
  // Remembers the ids of (gap, flag); the least recently used go past the limits.
  void put(std::string_view gap, bool flag, const int32_t* ids, size_t n) const;

 private:
  struct Entry {
    std::string text;
    bool flag;
    std::vector<int32_t> ids;
  };
  static constexpr size_t kMaxEntries = 1024;
  static constexpr size_t kMaxBytes = size_t(16) << 20;  // text and ids together

  mutable std::mutex mu_;
  mutable std::list<Entry> lru_;  // most recent first
  mutable std::unordered_multimap<size_t, std::list<Entry>::iterator> index_;
  mutable size_t bytes_ = 0;
};

}  // namespace lite_llama

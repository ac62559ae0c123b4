#include "tokenizer/gap_cache.h"

#include <functional>

namespace lite_llama {
namespace {

size_t key(std::string_view gap, bool flag) { return std::hash<std::string_view>{}(gap) ^ size_t(flag); }

}  // namespace

bool GapCache::append(std::string_view gap, bool flag, std::vector<int32_t>& out) const {
  const size_t k = key(gap, flag);
  std::lock_guard<std::mutex> lock(mu_);
  auto [b, e] = index_.equal_range(k);
  for (auto it = b; it != e; ++it) {
    const Entry& en = *it->second;
    if (en.flag != flag || en.text != gap) continue;
    lru_.splice(lru_.begin(), lru_, it->second);
    out.insert(out.end(), en.ids.begin(), en.ids.end());
    return true;
  }
  return false;
}

void GapCache::put(std::string_view gap, bool flag, const int32_t* ids, size_t n) const {
  const size_t k = key(gap, flag), size = gap.size() + n * sizeof(int32_t);
  if (size > kMaxBytes / 4) return;  // one huge prompt should not flush everything else
  std::lock_guard<std::mutex> lock(mu_);
  auto [b, e] = index_.equal_range(k);
  for (auto it = b; it != e; ++it)
    if (it->second->flag == flag && it->second->text == gap) return;  // another thread was first
  lru_.push_front(Entry{std::string(gap), flag, std::vector<int32_t>(ids, ids + n)});
  index_.emplace(k, lru_.begin());
  bytes_ += size;
  while (lru_.size() > kMaxEntries || bytes_ > kMaxBytes) {
    const Entry& old = lru_.back();
    const size_t ok = key(old.text, old.flag);
    for (auto [ob, oe] = index_.equal_range(ok); ob != oe; ++ob)
      if (&*ob->second == &old) {
        index_.erase(ob);
        break;
      }
    bytes_ -= old.text.size() + old.ids.size() * sizeof(int32_t);
    lru_.pop_back();
  }
}

}  // namespace lite_llama

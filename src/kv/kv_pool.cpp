#include "kv/kv_pool.h"

#include "core/error.h"

namespace lite_llama::kv {

KvPool::KvPool(int32_t num_slots) {
  LL_CHECK(num_slots > 0, "KV pool needs at least one slot, got {}", num_slots);
  refs_.assign(size_t(num_slots), 0);
  cached_.assign(size_t(num_slots), 0);
  free_.reserve(size_t(num_slots));
  // Lowest slots on top of the stack so a fresh pool hands out 0, 1, 2, ... (contiguous rows).
  for (int32_t i = num_slots - 1; i >= 0; --i) free_.push_back(i);
}

bool KvPool::alloc(int32_t n, std::vector<int32_t>& out) {
  if (n < 0 || n > num_free()) return false;
  for (int32_t i = 0; i < n; ++i) {
    int32_t s = free_.back();
    free_.pop_back();
    refs_[size_t(s)] = 1;
    out.push_back(s);
  }
  return true;
}

// Freed slots go on the stack last to first, so that the next allocation takes a released run in
// its order again: ascending slots stay one contiguous run (KvPool::alloc, Sequence::leading_run).
void KvPool::release(const int32_t* slots, int32_t n) {
  for (int32_t i = n - 1; i >= 0; --i) {
    int32_t s = slots[i];
    LL_CHECK(s >= 0 && s < num_slots() && refs_[size_t(s)] > 0, "KV pool: releasing free slot {}", s);
    if (--refs_[size_t(s)] == 0) free_.push_back(s);
    else if (refs_[size_t(s)] == 1 && cached_[size_t(s)]) ++cache_only_;
  }
}

void KvPool::retain(const int32_t* slots, int32_t n) {
  for (int32_t i = 0; i < n; ++i) {
    int32_t s = slots[i];
    LL_CHECK(s >= 0 && s < num_slots() && refs_[size_t(s)] > 0, "KV pool: retaining free slot {}", s);
    if (refs_[size_t(s)]++ == 1 && cached_[size_t(s)]) --cache_only_;
  }
}

void KvPool::cache_retain(const int32_t* slots, int32_t n) {
  for (int32_t i = 0; i < n; ++i) {
    const int32_t s = slots[i];
    LL_CHECK(s >= 0 && s < num_slots() && refs_[size_t(s)] > 0 && !cached_[size_t(s)],
             "KV pool: caching slot {} that is free or cached", s);
    ++refs_[size_t(s)];
    cached_[size_t(s)] = 1;
  }
}

void KvPool::cache_release(const int32_t* slots, int32_t n) {
  for (int32_t i = n - 1; i >= 0; --i) {  // last to first, as release()
    const int32_t s = slots[i];
    LL_CHECK(s >= 0 && s < num_slots() && cached_[size_t(s)], "KV pool: slot {} is not cached", s);
    cached_[size_t(s)] = 0;
    if (refs_[size_t(s)] == 1) --cache_only_;
    if (--refs_[size_t(s)] == 0) free_.push_back(s);
  }
}

ReqRows::ReqRows(int32_t max_reqs) : capacity_(max_reqs) {
  LL_CHECK(max_reqs > 0, "request table needs at least one row");
  used_.assign(size_t(max_reqs), 0);
  for (int32_t i = max_reqs - 1; i >= 0; --i) free_.push_back(i);
}

int32_t ReqRows::alloc() {
  if (free_.empty()) return -1;
  int32_t r = free_.back();
  free_.pop_back();
  used_[size_t(r)] = 1;
  return r;
}

void ReqRows::release(int32_t row) {
  LL_CHECK(row >= 0 && row < capacity_ && used_[size_t(row)], "request row {} is not in use", row);
  used_[size_t(row)] = 0;
  free_.push_back(row);
}

}  // namespace lite_llama::kv

// Token-granular KV slot allocator (TokenAttention): a request holds exactly the slots of its
// tokens, handed out one per token from a free list. Integers only; the memory is elsewhere.
// Refcounts let a slot be shared (prefix sharing) and freed when its last holder lets go.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace lite_llama::kv {

class KvPool {
 public:
  explicit KvPool(int32_t num_slots);

  int32_t num_slots() const { return int32_t(refs_.size()); }
  int32_t num_free() const { return int32_t(free_.size()); }
  int32_t num_used() const { return num_slots() - num_free(); }

  // Appends n fresh slots (refcount 1) to out; returns false, changing nothing, if too few.
  bool alloc(int32_t n, std::vector<int32_t>& out);
  // Drops one reference of each slot; slots reaching zero return to the free list.
  void release(const int32_t* slots, int32_t n);
  void retain(const int32_t* slots, int32_t n);
  int32_t refcount(int32_t slot) const { return refs_[size_t(slot)]; }

  // The prefix cache's own reference, taken and dropped like retain / release: the pool then
  // counts the slots only the cache holds, so "in use by requests" costs O(1) to ask.
  void cache_retain(const int32_t* slots, int32_t n);
  void cache_release(const int32_t* slots, int32_t n);
  int32_t num_cache_only() const { return cache_only_; }

 private:
  std::vector<int32_t> free_;  // stack: most recently freed first (warm in cache)
  std::vector<int32_t> refs_;
  std::vector<uint8_t> cached_;  // the prefix cache holds a reference
  int32_t cache_only_ = 0;       // slots whose one reference is the cache's
};

// Rows of the request -> slot table: one per running request, recycled on finish.
class ReqRows {
 public:
  explicit ReqRows(int32_t max_reqs);
  int32_t capacity() const { return capacity_; }
  int32_t num_free() const { return int32_t(free_.size()); }
  int32_t alloc();  // -1 when none is free
  void release(int32_t row);

 private:
  int32_t capacity_;
  std::vector<int32_t> free_;
  std::vector<uint8_t> used_;
};

}  // namespace lite_llama::kv

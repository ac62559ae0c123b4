// Automatic prefix caching: a radix tree (compressed edges) over token ids whose nodes hold the
// KV pool slots of those tokens, so a request starting like an earlier one skips recomputing the
// shared prefix. Integers only, like KvPool.
//
// Ownership is by KvPool refcounts, no locks: the tree holds one reference on every slot it
// caches, and a request using a cached prefix holds its own (the caller retains what match()
// returns). A cached slot whose refcount is 1 is used by no request, so it may be evicted;
// eviction only ever drops the tree's reference of such slots, never a running request's KV.
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "kv/kv_pool.h"

namespace lite_llama::kv {

struct RadixStats {
  int64_t queried_tokens = 0;   // tokens of the lookups recorded by record_lookup()
  int64_t hit_tokens = 0;       // of which served from the cache
  int64_t inserted_tokens = 0;  // tokens that became cached
  int64_t evicted_tokens = 0;   // slots given back to the pool by evict()
};

class RadixCache {
 public:
  explicit RadixCache(KvPool& pool);
  // Does not touch the pool (it may be gone already): reset() first to give the slots back.
  ~RadixCache() = default;
  RadixCache(const RadixCache&) = delete;
  RadixCache& operator=(const RadixCache&) = delete;

  // Longest cached prefix of tokens[0, n): appends its slots to slots_out and returns its length.
  // Splits the edge the prefix ends in, so the matched part ages apart from the rest, and marks
  // the path used. Takes no reference: the caller retains the slots it keeps before the next
  // evict(). O(length matched + edge split).
  int32_t match(const int32_t* tokens, int32_t n, std::vector<int32_t>& slots_out);
  // Caches tokens[0, n) whose KV is in slots[0, n). The tree retains the slots of the tokens it
  // did not hold; where it holds a token already it keeps its own slot, and the caller's copy
  // stays the caller's to release. Returns the number of newly cached tokens.
  int32_t insert(const int32_t* tokens, const int32_t* slots, int32_t n);
  // Gives back to the pool up to n_needed slots that no request holds, least recently used leaf
  // first and a leaf's tail before its head. Returns how many slots became free.
  int32_t evict(int32_t n_needed);
  // How many slots evict() could free now: walks the tree (O(nodes + unheld slots)); for tests and
  // debugging (admission decides on num_unheld(), which bounds it).
  int32_t num_evictable() const;
  // Slots only the tree holds (refcount 1): free for the taking, not in use by any request.
  int32_t num_unheld() const { return pool_.num_cache_only(); }
  // Drops the tree's reference on every slot (held ones stay with their requests) and empties it.
  void reset();

  // The lookup of an admitted request: kept apart from match() so a retried admission counts once.
  void record_lookup(int32_t queried, int32_t hit) {
    stats_.queried_tokens += queried;
    stats_.hit_tokens += hit;
  }
  int32_t cached_tokens() const { return cached_; }  // slots the tree holds a reference on
  int32_t num_nodes() const { return int32_t(nodes_.size() - free_nodes_.size()) - 1; }
  const RadixStats& stats() const { return stats_; }

  // For tests and debugging: every root-to-leaf path with its slots (O(cached tokens x depth)).
  void for_each_path(const std::function<void(const std::vector<int32_t>& tokens,
                                              const std::vector<int32_t>& slots)>& fn) const;
  // Throws if the tree is inconsistent (links, sorted children, empty edges, counts, refcounts).
  void validate() const;

 private:
  struct Child {
    int32_t token;  // first token of the child's edge
    int32_t node;
  };
  struct Node {
    std::vector<int32_t> key;    // tokens of the edge into this node (empty only at the root)
    std::vector<int32_t> slots;  // their KV slots, one per token
    std::vector<Child> children;  // sorted by token: binary search
    int32_t parent = -1;
    uint64_t last_use = 0;  // logical clock
  };

  int32_t find_child(int32_t node, int32_t token) const;
  int32_t new_node(int32_t parent, const int32_t* tokens, const int32_t* slots, int32_t n);
  void split(int32_t node, int32_t k);  // node keeps key[0, k); a new child takes the rest
  void remove_leaf(int32_t node);
  int32_t unheld_tail(int32_t node) const;

  KvPool& pool_;
  std::vector<Node> nodes_;  // nodes_[0] is the root; indices stay valid, freed ones recycled
  std::vector<int32_t> free_nodes_;
  int32_t cached_ = 0;
  uint64_t clock_ = 0;
  RadixStats stats_;
};

}  // namespace lite_llama::kv

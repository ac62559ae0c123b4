#include "kv/radix_cache.h"

#include <algorithm>
#include <queue>
#include <utility>

#include "core/error.h"

namespace lite_llama::kv {

RadixCache::RadixCache(KvPool& pool) : pool_(pool) { nodes_.emplace_back(); }

int32_t RadixCache::find_child(int32_t node, int32_t token) const {
  const std::vector<Child>& ch = nodes_[size_t(node)].children;
  auto it = std::lower_bound(ch.begin(), ch.end(), token,
                             [](const Child& c, int32_t t) { return c.token < t; });
  return it != ch.end() && it->token == token ? it->node : -1;
}

int32_t RadixCache::new_node(int32_t parent, const int32_t* tokens, const int32_t* slots,
                             int32_t n) {
  int32_t x;
  if (!free_nodes_.empty()) {
    x = free_nodes_.back();
    free_nodes_.pop_back();
  } else {
    x = int32_t(nodes_.size());
    nodes_.emplace_back();  // may move nodes_: no Node& is held across this
  }
  Node& nd = nodes_[size_t(x)];
  nd.key.assign(tokens, tokens + n);
  nd.slots.assign(slots, slots + n);
  nd.children.clear();
  nd.parent = parent;
  nd.last_use = clock_;
  std::vector<Child>& ch = nodes_[size_t(parent)].children;
  auto it = std::lower_bound(ch.begin(), ch.end(), tokens[0],
                             [](const Child& c, int32_t t) { return c.token < t; });
  ch.insert(it, Child{tokens[0], x});
  return x;
}

void RadixCache::split(int32_t node, int32_t k) {
  // The node keeps its place under its parent (no re-sorting there); the tail moves down.
  const Node& src = nodes_[size_t(node)];
  std::vector<int32_t> tail_key(src.key.begin() + k, src.key.end());
  std::vector<int32_t> tail_slots(src.slots.begin() + k, src.slots.end());
  std::vector<Child> grandchildren = std::move(nodes_[size_t(node)].children);
  const uint64_t last_use = src.last_use;
  nodes_[size_t(node)].children.clear();
  const int32_t t = new_node(node, tail_key.data(), tail_slots.data(), int32_t(tail_key.size()));
  Node& tail = nodes_[size_t(t)];
  tail.last_use = last_use;
  tail.children = std::move(grandchildren);
  for (const Child& c : tail.children) nodes_[size_t(c.node)].parent = t;
  Node& head = nodes_[size_t(node)];
  head.key.resize(size_t(k));
  head.slots.resize(size_t(k));
}

void RadixCache::remove_leaf(int32_t node) {
  Node& nd = nodes_[size_t(node)];
  std::vector<Child>& ch = nodes_[size_t(nd.parent)].children;
  ch.erase(std::find_if(ch.begin(), ch.end(), [&](const Child& c) { return c.node == node; }));
  nd = Node{};  // parent -1 marks it free; drops the vectors' memory
  free_nodes_.push_back(node);
}

int32_t RadixCache::unheld_tail(int32_t node) const {
  const std::vector<int32_t>& s = nodes_[size_t(node)].slots;
  int32_t j = int32_t(s.size());
  while (j > 0 && pool_.refcount(s[size_t(j - 1)]) == 1) --j;
  return int32_t(s.size()) - j;
}

int32_t RadixCache::match(const int32_t* tokens, int32_t n, std::vector<int32_t>& slots_out) {
  const uint64_t now = ++clock_;
  nodes_[0].last_use = now;
  int32_t node = 0, i = 0;
  while (i < n) {
    const int32_t c = find_child(node, tokens[i]);
    if (c < 0) break;
    const std::vector<int32_t>& key = nodes_[size_t(c)].key;
    const int32_t len = int32_t(key.size());
    int32_t k = 1;  // the first token matched through find_child
    while (k < len && i + k < n && key[size_t(k)] == tokens[i + k]) ++k;
    if (k < len) split(c, k);
    Node& m = nodes_[size_t(c)];
    slots_out.insert(slots_out.end(), m.slots.begin(), m.slots.end());
    m.last_use = now;
    i += k;
    node = c;
    if (k < len) break;
  }
  return i;
}

int32_t RadixCache::insert(const int32_t* tokens, const int32_t* slots, int32_t n) {
  const uint64_t now = ++clock_;
  nodes_[0].last_use = now;
  int32_t node = 0, i = 0;
  while (i < n) {
    const int32_t c = find_child(node, tokens[i]);
    if (c < 0) {
      const int32_t added = n - i;
      pool_.cache_retain(slots + i, added);
      new_node(node, tokens + i, slots + i, added);
      cached_ += added;
      stats_.inserted_tokens += added;
      return added;
    }
    const std::vector<int32_t>& key = nodes_[size_t(c)].key;
    const int32_t len = int32_t(key.size());
    int32_t k = 1;
    while (k < len && i + k < n && key[size_t(k)] == tokens[i + k]) ++k;
    if (k < len) split(c, k);
    nodes_[size_t(c)].last_use = now;
    i += k;
    node = c;
  }
  return 0;
}

int32_t RadixCache::evict(int32_t n_needed) {
  if (n_needed <= 0) return 0;
  using Item = std::pair<uint64_t, int32_t>;  // (last use, node): oldest on top
  std::priority_queue<Item, std::vector<Item>, std::greater<>> heap;
  for (size_t x = 1; x < nodes_.size(); ++x) {
    const Node& nd = nodes_[x];
    if (nd.parent >= 0 && nd.children.empty()) heap.push({nd.last_use, int32_t(x)});
  }
  int32_t freed = 0;
  while (freed < n_needed && !heap.empty()) {
    const int32_t x = heap.top().second;
    heap.pop();
    Node& nd = nodes_[size_t(x)];
    const int32_t len = int32_t(nd.slots.size());
    const int32_t take = std::min(unheld_tail(x), n_needed - freed);
    if (take == 0) continue;  // a request uses this leaf: its ancestors stay too
    pool_.cache_release(nd.slots.data() + (len - take), take);
    nd.key.resize(size_t(len - take));
    nd.slots.resize(size_t(len - take));
    freed += take;
    cached_ -= take;
    if (take < len) continue;
    const int32_t p = nd.parent;
    remove_leaf(x);
    if (p != 0 && nodes_[size_t(p)].children.empty()) heap.push({nodes_[size_t(p)].last_use, p});
  }
  stats_.evicted_tokens += freed;
  return freed;
}

int32_t RadixCache::num_evictable() const {
  // Post-order without recursion (a chain of nodes can be as deep as a context).
  std::vector<int32_t> order, stack = {0};
  while (!stack.empty()) {
    const int32_t x = stack.back();
    stack.pop_back();
    order.push_back(x);
    for (const Child& c : nodes_[size_t(x)].children) stack.push_back(c.node);
  }
  std::vector<int32_t> count(nodes_.size(), 0);
  std::vector<uint8_t> whole(nodes_.size(), 0);  // the node and its subtree can all go
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    const int32_t x = *it;
    bool kids_whole = true;
    int32_t sum = 0;
    for (const Child& c : nodes_[size_t(x)].children) {
      sum += count[size_t(c.node)];
      kids_whole = kids_whole && whole[size_t(c.node)];
    }
    if (x == 0) return sum;  // the root comes last
    const int32_t run = kids_whole ? unheld_tail(x) : 0;
    count[size_t(x)] = sum + run;
    whole[size_t(x)] = kids_whole && run == int32_t(nodes_[size_t(x)].slots.size());
  }
  return 0;
}

void RadixCache::reset() {
  for (size_t x = 1; x < nodes_.size(); ++x) {
    const Node& nd = nodes_[x];
    if (nd.parent >= 0) pool_.cache_release(nd.slots.data(), int32_t(nd.slots.size()));
  }
  nodes_.resize(1);
  nodes_[0].children.clear();
  free_nodes_.clear();
  cached_ = 0;
}

void RadixCache::for_each_path(
    const std::function<void(const std::vector<int32_t>&, const std::vector<int32_t>&)>& fn)
    const {
  std::vector<int32_t> tokens, slots;
  std::vector<std::pair<int32_t, size_t>> stack;  // (node, tokens before its edge)
  for (const Child& c : nodes_[0].children) stack.push_back({c.node, 0});
  while (!stack.empty()) {
    auto [x, depth] = stack.back();
    stack.pop_back();
    const Node& nd = nodes_[size_t(x)];
    tokens.resize(depth);
    slots.resize(depth);
    tokens.insert(tokens.end(), nd.key.begin(), nd.key.end());
    slots.insert(slots.end(), nd.slots.begin(), nd.slots.end());
    if (nd.children.empty()) fn(tokens, slots);
    for (const Child& c : nd.children) stack.push_back({c.node, tokens.size()});
  }
}

void RadixCache::validate() const {
  LL_CHECK(nodes_[0].key.empty() && nodes_[0].slots.empty(), "radix cache: root has an edge");
  std::vector<uint8_t> seen(size_t(pool_.num_slots()), 0);
  int32_t cached = 0, reached = 0, only = 0;
  std::vector<int32_t> stack = {0};
  while (!stack.empty()) {
    const int32_t x = stack.back();
    stack.pop_back();
    const Node& nd = nodes_[size_t(x)];
    ++reached;
    LL_CHECK(x == 0 || !nd.key.empty(), "radix cache: node {} has an empty edge", x);
    LL_CHECK(nd.key.size() == nd.slots.size(), "radix cache: node {} tokens/slots differ", x);
    for (int32_t s : nd.slots) {
      LL_CHECK(s >= 0 && s < pool_.num_slots() && pool_.refcount(s) >= 1,
               "radix cache: node {} holds free slot {}", x, s);
      LL_CHECK(!seen[size_t(s)], "radix cache: slot {} cached twice", s);
      seen[size_t(s)] = 1;
      only += pool_.refcount(s) == 1;
    }
    cached += int32_t(nd.slots.size());
    for (size_t i = 0; i < nd.children.size(); ++i) {
      const Child& c = nd.children[i];
      const Node& cn = nodes_[size_t(c.node)];
      LL_CHECK(cn.parent == x && !cn.key.empty() && cn.key[0] == c.token,
               "radix cache: bad link {} -> {}", x, c.node);
      LL_CHECK(i == 0 || nd.children[i - 1].token < c.token,
               "radix cache: children of {} unsorted or sharing a first token", x);
      stack.push_back(c.node);
    }
  }
  LL_CHECK(cached == cached_, "radix cache: counts {} cached tokens, holds {}", cached_, cached);
  LL_CHECK(only == pool_.num_cache_only(), "radix cache: {} slots held by the tree alone, the pool counts {}",
           only, pool_.num_cache_only());
  LL_CHECK(reached == num_nodes() + 1, "radix cache: {} nodes reachable, {} live", reached,
           num_nodes() + 1);
}

}  // namespace lite_llama::kv

#include "grammar/matcher.h"

#include <algorithm>

namespace lite_llama::grammar {

namespace {

size_t node_hash(int32_t pos, int32_t parent) {
  uint64_t k = (uint64_t(uint32_t(pos)) << 32) | uint32_t(parent);
  k ^= k >> 33;
  k *= 0xff51afd7ed558ccdULL;
  k ^= k >> 33;
  return size_t(k);
}

}  // namespace

int32_t Matcher::node(int32_t pos, int32_t parent) {
  if (2 * (used_slots_ + 1) > slots_.size()) reindex();
  const size_t mask = slots_.size() - 1;
  size_t i = node_hash(pos, parent) & mask;
  for (; slots_[i] >= 0; i = (i + 1) & mask) {
    const auto id = size_t(slots_[i]);
    if (id < nodes_.size() && nodes_[id].pos == pos && nodes_[id].parent == parent) return int32_t(id);
  }
  nodes_.push_back({pos, parent});
  slots_[i] = int32_t(nodes_.size() - 1);
  ++used_slots_;
  return slots_[i];
}

void Matcher::reindex() {
  auto is_call = [&](const Node& n) { return g_->elems()[size_t(n.pos)].kind == Elem::Rule; };
  used_slots_ = size_t(std::count_if(nodes_.begin(), nodes_.end(), is_call));
  size_t cap = 64;
  while (cap < 4 * (used_slots_ + 1)) cap *= 2;
  slots_.assign(cap, -1);
  for (size_t id = 0; id < nodes_.size(); ++id) {
    if (!is_call(nodes_[id])) continue;
    size_t i = node_hash(nodes_[id].pos, nodes_[id].parent) & (cap - 1);
    while (slots_[i] >= 0) i = (i + 1) & (cap - 1);
    slots_[i] = int32_t(id);
  }
}

Matcher::Matcher(const Grammar& g) : g_(&g) {
  Frame f{0, 0, 0, false, false};
  start_step();
  for (int32_t a : g.alts(g.root())) expand(a, kRoot, f);
  if (step_overflowed()) {  // no stack at all: nothing is accepted
    nodes_.clear();
    heads_.clear();
    reindex();
    f.can_end = false;
    overflowed_ = true;
  }
  f.heads_end = uint32_t(heads_.size());
  f.nodes_size = uint32_t(nodes_.size());
  frames_.push_back(f);
}

Matcher Matcher::at_stack(const Grammar& g, const std::vector<int32_t>& top_down, bool complete) {
  // Not from Matcher(g): expanding the root costs as much as the grammar's start has
  // alternatives, and the token masks make one of these per entry.
  Matcher m(&g);
  m.reindex();
  int32_t parent = complete ? kRoot : kSentinel;
  for (size_t i = top_down.size(); i-- > 0;) parent = m.node(top_down[i], parent);
  m.heads_.push_back(parent);
  m.frames_.push_back({0, 1, uint32_t(m.nodes_.size()), false, false});
  return m;
}

void Matcher::start_step() {
  visited_.clear();
  if (!visited_more_.empty()) visited_more_.clear();  // clear() costs its buckets even when empty
  work_ = 0;
  depth_ = 0;
  overflow_ = false;
}

bool Matcher::seen(int32_t pos, int32_t parent) {
  // Most steps visit a handful of positions: a linear search; a large closure (a long enum,
  // an ambiguous grammar) goes on in a hash set so that the step stays linear in its size.
  constexpr size_t kLinearVisited = 64;
  const uint64_t key = (uint64_t(uint32_t(pos)) << 32) | uint32_t(parent);
  if (visited_.size() < kLinearVisited) {
    if (std::find(visited_.begin(), visited_.end(), key) != visited_.end()) return true;
    visited_.push_back(key);
    if (visited_.size() == kLinearVisited) visited_more_.insert(visited_.begin(), visited_.end());
    return false;
  }
  return !visited_more_.insert(key).second;
}

// Pushes stacks until each top is a byte set; rule ends pop to the caller's next element.
void Matcher::expand(int32_t pos, int32_t parent, Frame& f) {
  if (++work_ > kMaxStepWork || depth_ >= kMaxDepth) {
    overflow_ = true;
    return;
  }
  struct Depth {
    int& d;
    explicit Depth(int& x) : d(++x) {}
    ~Depth() { --d; }
  } depth(depth_);
  const Elem& e = g_->elems()[size_t(pos)];
  if (seen(pos, parent)) return;
  switch (e.kind) {
    case Elem::Bytes:  // a top is never a parent: only calls need one id per content
      nodes_.push_back({pos, parent});
      heads_.push_back(int32_t(nodes_.size() - 1));
      return;
    case Elem::Rule: {
      // A call in tail position returns straight to our caller: no node, so right recursion
      // (repetition) keeps stacks flat.
      int32_t call = parent;
      if (g_->elems()[size_t(pos) + 1].kind != Elem::End) call = node(pos, parent);
      for (int32_t a : g_->alts(e.arg)) expand(a, call, f);
      return;
    }
    case Elem::End:
      if (parent == kRoot) {
        f.can_end = true;
      } else if (parent == kSentinel) {
        f.escaped = true;
      } else {
        const Node caller = nodes_[size_t(parent)];
        expand(caller.pos + 1, caller.parent, f);
      }
      return;
  }
}

bool Matcher::accept_byte(uint8_t b) {
  const size_t begin = frames_.back().heads_begin, end = frames_.back().heads_end;
  Frame f{uint32_t(end), 0, 0, false, false};
  const size_t nodes_before = nodes_.size();
  start_step();
  for (size_t i = begin; i < end && !step_overflowed(); ++i) {
    const Node n = nodes_[size_t(heads_[i])];
    if (g_->bytes(g_->elems()[size_t(n.pos)].arg).test(b)) expand(n.pos + 1, n.parent, f);
  }
  overflowed_ = step_overflowed();
  if ((heads_.size() == end && !f.can_end && !f.escaped) || overflowed_) {
    nodes_.resize(nodes_before);
    heads_.resize(end);
    return false;
  }
  f.heads_end = uint32_t(heads_.size());
  f.nodes_size = uint32_t(nodes_.size());
  frames_.push_back(f);
  return true;
}

bool Matcher::accept_bytes(std::string_view s) {
  for (size_t i = 0; i < s.size(); ++i) {
    if (!accept_byte(uint8_t(s[i]))) {
      rollback(i);
      return false;
    }
  }
  return true;
}

void Matcher::rollback(size_t n) {
  n = std::min(n, history());
  if (n == 0) return;
  frames_.resize(frames_.size() - n);
  nodes_.resize(frames_.back().nodes_size);
  heads_.resize(frames_.back().heads_end);
}

void Matcher::commit() {
  Frame f = frames_.back();
  frames_.clear();
  if (nodes_.size() < 4096) {
    frames_.push_back(f);
    return;
  }
  // Keep the nodes reachable from the current tops, renumbered in order (parents first).
  std::vector<int32_t> remap(nodes_.size(), -1);
  std::vector<int32_t> order;
  for (uint32_t i = f.heads_begin; i < f.heads_end; ++i)
    for (int32_t k = heads_[i]; k >= 0 && remap[size_t(k)] == -1; k = nodes_[size_t(k)].parent) {
      remap[size_t(k)] = 0;
      order.push_back(k);
    }
  std::sort(order.begin(), order.end());
  std::vector<Node> kept;
  for (int32_t k : order) {
    remap[size_t(k)] = int32_t(kept.size());
    Node n = nodes_[size_t(k)];
    if (n.parent >= 0) n.parent = remap[size_t(n.parent)];
    kept.push_back(n);
  }
  std::vector<int32_t> heads;
  for (uint32_t i = f.heads_begin; i < f.heads_end; ++i) heads.push_back(remap[size_t(heads_[i])]);
  nodes_ = std::move(kept);
  heads_ = std::move(heads);
  reindex();
  frames_.push_back({0, uint32_t(heads_.size()), uint32_t(nodes_.size()), f.can_end, f.escaped});
}

bool Matcher::head_stack(size_t i, size_t max, std::vector<int32_t>& out) const {
  out.clear();
  int32_t k = heads_[frames_.back().heads_begin + i];
  for (; k >= 0 && out.size() < max; k = nodes_[size_t(k)].parent) out.push_back(nodes_[size_t(k)].pos);
  return k == kRoot;
}

void Matcher::state_key(std::string& out) const {
  const Frame& f = frames_.back();
  std::vector<std::string> stacks;
  for (uint32_t i = f.heads_begin; i < f.heads_end; ++i) {
    std::string s;
    for (int32_t k = heads_[i]; k >= 0; k = nodes_[size_t(k)].parent)
      s.append(reinterpret_cast<const char*>(&nodes_[size_t(k)].pos), sizeof(int32_t));
    stacks.push_back(std::move(s));
  }
  std::sort(stacks.begin(), stacks.end());
  out.assign(1, f.can_end ? 'E' : 'C');
  for (const auto& s : stacks) {
    const auto n = uint32_t(s.size());
    out.append(reinterpret_cast<const char*>(&n), sizeof n);
    out += s;
  }
}

}  // namespace lite_llama::grammar

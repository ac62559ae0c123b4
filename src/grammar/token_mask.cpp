#include "grammar/token_mask.h"

#include <algorithm>
#include <chrono>
#include <cstring>

namespace lite_llama::grammar {

namespace {

size_t common_prefix(std::string_view a, std::string_view b) {
  const size_t n = std::min(a.size(), b.size());
  size_t i = 0;
  while (i < n && a[i] == b[i]) ++i;
  return i;
}

// Walks tokens vocab.sorted()[at(k)], k < n (ascending), through m, rolling back only to the
// common prefix of consecutive tokens and skipping every token that shares a failing prefix.
// f(k, ok, escaped): ok when all bytes were accepted; otherwise escaped tells whether a stack
// left the bottom rule of an incomplete at_stack() matcher before the failing byte. m ends as it began.
template <class At, class F>
void walk(Matcher& m, const TokenVocab& v, size_t n, At at, F f) {
  std::vector<uint8_t> esc{0};  // esc[d]: some stack escaped within the first d bytes
  size_t depth = 0;
  std::string_view prev;
  for (size_t k = 0; k < n;) {
    const std::string_view t = v.sorted_bytes(size_t(at(k)));
    const size_t keep = std::min(depth, common_prefix(prev, t));
    m.rollback(depth - keep);
    depth = keep;
    esc.resize(depth + 1);
    bool ok = true;
    while (depth < t.size()) {
      if (!m.accept_byte(uint8_t(t[depth]))) {
        ok = false;
        break;
      }
      ++depth;
      esc.push_back(esc.back() || m.escaped());
    }
    prev = t;
    if (ok) {
      f(k++, true, false);
      continue;
    }
    const bool e = esc[depth];
    f(k++, false, e);
    // Sorted order keeps every token with the same first depth+1 bytes right after this one.
    while (k < n) {
      if (common_prefix(t, v.sorted_bytes(size_t(at(k)))) <= depth) break;
      f(k++, false, e);
    }
  }
  m.rollback(depth);
}

void set_bit(uint32_t* mask, int32_t t) { mask[size_t(t) / 32] |= 1u << (uint32_t(t) % 32); }
bool get_bit(const uint32_t* mask, int32_t t) { return (mask[size_t(t) / 32] >> (uint32_t(t) % 32)) & 1u; }

}  // namespace

TokenVocab::TokenVocab(std::vector<std::string> bytes, std::vector<int32_t> stop_ids)
    : bytes_(std::move(bytes)), stop_ids_(std::move(stop_ids)) {
  for (int32_t i = 0; i < int32_t(bytes_.size()); ++i)
    if (!bytes_[size_t(i)].empty()) sorted_.push_back(i);
  std::sort(sorted_.begin(), sorted_.end(),
            [&](int32_t a, int32_t b) { return bytes_[size_t(a)] < bytes_[size_t(b)]; });
  std::erase_if(stop_ids_, [&](int32_t t) { return t < 0 || t >= size(); });
  offsets_.push_back(0);
  for (int32_t id : sorted_) {
    text_ += bytes_[size_t(id)];
    offsets_.push_back(uint32_t(text_.size()));
  }
}

CompiledGrammar::CompiledGrammar(Grammar g, std::shared_ptr<const TokenVocab> vocab, size_t few)
    : grammar_(std::move(g)), vocab_(std::move(vocab)), few_(few) {}

const CompiledGrammar::Entry& CompiledGrammar::entry(const std::vector<int32_t>& top_down, bool complete,
                                                     const Entry* base) const {
  std::string key(reinterpret_cast<const char*>(top_down.data()), top_down.size() * sizeof(int32_t));
  if (complete) key.push_back('C');
  {
    std::lock_guard lock(mu_);
    if (auto it = cache_.find(key); it != cache_.end()) return *it->second;
  }
  // Built without the lock so that other rows go on; a racing thread's copy is dropped.
  const auto t0 = std::chrono::steady_clock::now();
  auto e = std::make_unique<Entry>();
  Matcher m = Matcher::at_stack(grammar_, top_down, complete);
  const auto& sorted = vocab_->sorted();
  // A frame added below changes only what happens after the frames above escape: the base's
  // accepted and rejected tokens stay, and only its uncertain ones need a walk.
  if (base) {
    e->accepted = base->accepted;
    const auto& cand = base->uncertain;
    walk(m, *vocab_, cand.size(), [&](size_t k) { return cand[k]; }, [&](size_t k, bool ok, bool esc) {
      if (ok)
        set_bit(e->accepted.data(), sorted[size_t(cand[k])]);
      else if (esc)
        e->uncertain.push_back(cand[k]);
    });
  } else {
    e->accepted.assign(vocab_->mask_words(), 0);
    walk(m, *vocab_, sorted.size(), [](size_t k) { return k; }, [&](size_t k, bool ok, bool esc) {
      if (ok)
        set_bit(e->accepted.data(), sorted[k]);
      else if (esc)
        e->uncertain.push_back(int32_t(k));
    });
  }
  entries_.fetch_add(1, std::memory_order_relaxed);
  entry_us_.fetch_add(long(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count()),
                      std::memory_order_relaxed);
  std::lock_guard lock(mu_);
  auto& slot = cache_[key];
  if (!slot) slot = std::move(e);
  return *slot;
}

void CompiledGrammar::fill_mask(Matcher& m, uint32_t* mask) const {
  const size_t words = vocab_->mask_words();
  std::string key;
  m.state_key(key);
  fills_.fetch_add(1, std::memory_order_relaxed);
  {
    std::lock_guard lock(mu_);
    auto it = states_.find(key);
    if (it != states_.end()) {
      state_hits_.fetch_add(1, std::memory_order_relaxed);
      std::memcpy(mask, it->second.data(), words * sizeof(uint32_t));
      return;
    }
  }
  compute_mask(m, mask);
  std::lock_guard lock(mu_);
  const size_t bytes = words * sizeof(uint32_t) + key.size();
  if (state_bytes_ + bytes <= kStateCacheBytes) {
    state_bytes_ += bytes;
    states_.emplace(std::move(key), std::vector<uint32_t>(mask, mask + words));
  }
}

void CompiledGrammar::compute_mask(Matcher& m, uint32_t* mask) const {
  const TokenVocab& v = *vocab_;
  std::memset(mask, 0, v.mask_words() * sizeof(uint32_t));
  std::vector<const Entry*> used;
  std::vector<int32_t> stack, top, candidates;
  for (size_t h = 0; h < m.num_heads(); ++h) {
    const bool whole = m.head_stack(h, kMaxDepth, stack);
    // The shallowest entry that leaves few tokens uncertain (deeper ones are more specific,
    // so fewer stacks share them).
    const Entry* e = nullptr;
    for (size_t k = 1; k <= stack.size(); ++k) {
      top.assign(stack.begin(), stack.begin() + ptrdiff_t(k));
      e = &entry(top, whole && k == stack.size(), e);
      if (e->uncertain.size() <= few_) break;
    }
    if (std::find(used.begin(), used.end(), e) == used.end()) used.push_back(e);
  }
  for (const Entry* e : used) {
    const size_t words = e->accepted.size();
    for (size_t w = 0; w < words; ++w) mask[w] |= e->accepted[w];
  }
  const auto& sorted = v.sorted();
  for (const Entry* e : used)
    for (int32_t k : e->uncertain)
      if (!get_bit(mask, sorted[size_t(k)])) candidates.push_back(k);
  if (used.size() > 1) {  // each entry's list is sorted already
    std::sort(candidates.begin(), candidates.end());
    candidates.erase(std::unique(candidates.begin(), candidates.end()), candidates.end());
  }
  checked_.fetch_add(long(candidates.size()), std::memory_order_relaxed);
  walk(m, v, candidates.size(), [&](size_t k) { return candidates[k]; },
       [&](size_t k, bool ok, bool) {
         if (ok) set_bit(mask, sorted[size_t(candidates[k])]);
       });
  if (m.can_end())
    for (int32_t t : v.stop_ids()) set_bit(mask, t);
}

}  // namespace lite_llama::grammar

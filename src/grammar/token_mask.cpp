#include "grammar/token_mask.h"

#include <algorithm>
#include <chrono>
#include <cstring>

namespace lite_llama::grammar {

namespace {

size_t common_prefix(const std::string& a, const std::string& b) {
  const size_t n = std::min(a.size(), b.size());
  size_t i = 0;
  while (i < n && a[i] == b[i]) ++i;
  return i;
}

// Walks tokens vocab.sorted()[at(k)], k < n (ascending), through m, rolling back only to the
// common prefix of consecutive tokens and skipping every token that shares a failing prefix.
// f(k, ok, escaped): ok when all bytes were accepted; otherwise escaped tells whether a stack
// left the start rule of an at_position() matcher before the failing byte. m ends as it began.
template <class At, class F>
void walk(Matcher& m, const TokenVocab& v, size_t n, At at, F f) {
  std::vector<uint8_t> esc{0};  // esc[d]: some stack escaped within the first d bytes
  size_t depth = 0;
  const std::string* prev = nullptr;
  for (size_t k = 0; k < n;) {
    const std::string& t = v.bytes(v.sorted()[size_t(at(k))]);
    const size_t keep = prev ? std::min(depth, common_prefix(*prev, t)) : 0;
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
    prev = &t;
    if (ok) {
      f(k++, true, false);
      continue;
    }
    const bool e = esc[depth];
    f(k++, false, e);
    // Sorted order keeps every token with the same first depth+1 bytes right after this one.
    while (k < n) {
      const std::string& u = v.bytes(v.sorted()[size_t(at(k))]);
      if (common_prefix(t, u) <= depth) break;
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
}

CompiledGrammar::CompiledGrammar(Grammar g, std::shared_ptr<const TokenVocab> vocab)
    : grammar_(std::move(g)), vocab_(std::move(vocab)) {}

const CompiledGrammar::Entry& CompiledGrammar::entry(int32_t pos) const {
  std::lock_guard lock(mu_);
  auto& slot = cache_[pos];
  if (slot) return *slot;
  const auto t0 = std::chrono::steady_clock::now();
  auto e = std::make_unique<Entry>();
  e->accepted.assign(vocab_->mask_words(), 0);
  Matcher m = Matcher::at_position(grammar_, pos);
  const auto& sorted = vocab_->sorted();
  walk(m, *vocab_, sorted.size(), [](size_t k) { return k; }, [&](size_t k, bool ok, bool esc) {
    if (ok)
      set_bit(e->accepted.data(), sorted[k]);
    else if (esc)
      e->uncertain.push_back(int32_t(k));
  });
  slot = std::move(e);
  entries_.fetch_add(1, std::memory_order_relaxed);
  entry_us_.fetch_add(long(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count()),
                      std::memory_order_relaxed);
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
  std::vector<int32_t> positions, candidates;
  m.head_positions(positions);
  for (int32_t p : positions) {
    const Entry& e = entry(p);
    for (size_t w = 0; w < e.accepted.size(); ++w) mask[w] |= e.accepted[w];
    candidates.insert(candidates.end(), e.uncertain.begin(), e.uncertain.end());
  }
  const auto& sorted = v.sorted();
  std::erase_if(candidates, [&](int32_t k) { return get_bit(mask, sorted[size_t(k)]); });
  if (positions.size() > 1) {  // each position's list is sorted already
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

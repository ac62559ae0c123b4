#include "grammar/token_mask.h"

#include <algorithm>
#include <bit>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <unordered_map>

namespace lite_llama::grammar {

namespace {

size_t common_prefix(std::string_view a, std::string_view b) {
  const size_t n = std::min(a.size(), b.size());
  size_t i = 0;
  while (i < n && a[i] == b[i]) ++i;
  return i;
}

// The end of the run of tokens from k on that share t's first depth + 1 bytes (sorted order keeps
// them together): galloping, so that a walk rejecting a first byte skips its tokens in log time.
template <class At>
size_t prefix_run_end(const TokenVocab& v, size_t n, At& at, size_t k, std::string_view t, size_t depth) {
  auto shares = [&](size_t j) { return common_prefix(t, v.sorted_bytes(size_t(at(j)))) > depth; };
  size_t lo = k, step = 1;  // shares(lo - 1) holds (or lo == k)
  while (lo + step <= n && shares(lo + step - 1)) lo += step, step *= 2;
  size_t hi = std::min(n, lo + step);  // !shares(hi) or hi == n
  while (lo < hi) {
    const size_t mid = lo + (hi - lo) / 2;
    if (shares(mid)) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

// Reports token k, whose walk accepted all of t (ok) or failed at byte `depth`; a failed one takes
// every following token that shares its first depth + 1 bytes with it. f is called for accepted
// tokens and for rejected ones that escaped; the rest are skipped. Returns the next token to walk.
template <class At, class F>
size_t report(const TokenVocab& v, size_t n, At& at, F& f, size_t k, std::string_view t, bool ok, size_t depth,
              bool escaped) {
  if (ok || escaped) f(k, ok, escaped);
  if (ok) return k + 1;
  const size_t end = prefix_run_end(v, n, at, k + 1, t, depth);
  if (escaped)
    for (++k; k < end; ++k) f(k, false, true);
  return end;
}

// Walks tokens vocab.sorted()[at(k)], k < n (ascending), through m, rolling back only to the
// common prefix of consecutive tokens and skipping every token that shares a failing prefix.
// f(k, ok, escaped): ok when all bytes were accepted; otherwise escaped tells that a stack left
// the bottom rule of an incomplete at_stack() matcher before the failing byte (tokens rejected
// without escaping are not reported). m ends as it began.
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
    k = report(v, n, at, f, k, t, ok, depth, !ok && esc[depth]);
  }
  m.rollback(depth);
}

// The same walk for building entries, through a byte automaton built lazily from m: a state is
// a set of stacks (Matcher::state_key), so once a state has been seen its bytes cost a table
// lookup instead of a closure over every head (~200 ns a byte inside a JSON string, where a
// walk takes ~200k bytes). The matcher follows the walk only where a transition is new. Bytes
// that no byte set of the grammar tells apart share a column (`cls`, `ncls` columns).
// A grammar whose states differ at every trie node (a long enum) stops adding states at
// kMaxTable; bytes from a state left out go through the matcher.
template <class At, class F>
void walk_dfa(Matcher& m, const TokenVocab& v, const uint8_t* cls, size_t ncls, size_t n, At at, F f) {
  constexpr int32_t kUnknown = -2, kDead = -1, kNoState = INT32_MAX >> 1;
  constexpr size_t kMaxTable = size_t(1) << 22;
  std::unordered_map<std::string, int32_t> ids;
  std::vector<int32_t> next;  // state * ncls + class: next state << 1 | escaped, or kDead
  std::string key;
  auto add_state = [&] {
    m.state_key(key);
    if (auto it = ids.find(key); it != ids.end()) return it->second;
    if (next.size() + ncls > kMaxTable) return kNoState;
    next.resize(next.size() + ncls, kUnknown);
    return ids.emplace(key, int32_t(ids.size())).first->second;
  };
  std::vector<int32_t> st{add_state()};  // st[d]: the state after the first d bytes
  std::vector<uint8_t> esc{0};
  size_t depth = 0, md = 0;  // md: bytes of the current token the matcher has taken
  std::string_view prev;
  for (size_t k = 0; k < n;) {
    const std::string_view t = v.sorted_bytes(size_t(at(k)));
    depth = std::min(depth, common_prefix(prev, t));
    if (md > depth) {
      m.rollback(md - depth);
      md = depth;
    }
    if (st.size() < t.size() + 1) {
      st.resize(t.size() + 1);
      esc.resize(t.size() + 1);
    }
    bool ok = true;
    for (; depth < t.size(); ++depth) {
      const size_t slot = st[depth] == kNoState ? SIZE_MAX : size_t(st[depth]) * ncls + cls[uint8_t(t[depth])];
      int32_t x = slot == SIZE_MAX ? kUnknown : next[slot];
      if (x == kUnknown) {
        for (; md < depth; ++md) m.accept_byte(uint8_t(t[md]));  // taken before: accepted
        if (m.accept_byte(uint8_t(t[depth]))) {
          ++md;
          x = add_state() << 1 | int32_t(m.escaped());
        } else {
          x = kDead;
        }
        if (slot != SIZE_MAX) next[slot] = x;
      }
      if (x == kDead) {
        ok = false;
        break;
      }
      st[depth + 1] = x >> 1;
      esc[depth + 1] = esc[depth] | uint8_t(x & 1);
    }
    prev = t;
    k = report(v, n, at, f, k, t, ok, depth, !ok && esc[depth]);
  }
  m.rollback(md);
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
    : grammar_(std::move(g)), vocab_(std::move(vocab)), few_(few) {
  // Byte classes: bytes in the same byte sets behave alike in every state.
  std::unordered_map<std::string, uint8_t> ids;
  for (int b = 0; b < 256; ++b) {
    std::string sig(grammar_.num_byte_sets(), '0');
    for (size_t i = 0; i < sig.size(); ++i) sig[i] = char('0' + grammar_.bytes(int32_t(i)).test(size_t(b)));
    cls_[b] = ids.try_emplace(sig, uint8_t(ids.size())).first->second;
  }
  ncls_ = ids.size();
  for (size_t p = 0; p < grammar_.elems().size(); ++p) {
    const int32_t set = grammar_.chain(int32_t(p)).first;
    if (set < 0 || counts_.count(set)) continue;
    auto& counts = counts_[set];
    for (size_t k = 0; k < vocab_->sorted().size(); ++k) {
      const std::string_view t = vocab_->sorted_bytes(k);
      int32_t n = 0;
      for (size_t i = 1; i < t.size(); ++i) n += grammar_.bytes(set).test(uint8_t(t[i]));
      if (n > 0) counts.emplace_back(n, int32_t(k));
    }
    std::stable_sort(counts.begin(), counts.end(), [](auto a, auto b) { return a.first > b.first; });
  }
}

const CompiledGrammar::Entry& CompiledGrammar::entry(const std::vector<int32_t>& top_down, bool complete,
                                                     const Entry* base) const {
  std::string key(reinterpret_cast<const char*>(top_down.data()), top_down.size() * sizeof(int32_t));
  if (complete) key.push_back('C');
  if (const Entry* hit = find_or_claim(key)) return *hit;
  Claim claim{this, &key};
  // Built without the lock so that other rows go on.
  const auto t0 = std::chrono::steady_clock::now();
  auto e = std::make_unique<Entry>();
  Matcher m = Matcher::at_stack(grammar_, top_down, complete);
  const auto& sorted = vocab_->sorted();
  // A frame added below changes only what happens after the frames above escape: the base's
  // accepted and rejected tokens stay, and only its uncertain ones need a walk.
  if (base) {
    accepted_bits(*base, e->accepted);
    const auto& cand = base->uncertain;
    walk_dfa(m, *vocab_, cls_, ncls_, cand.size(), [&](size_t k) { return cand[k]; }, [&](size_t k, bool ok, bool esc) {
      if (ok)
        set_bit(e->accepted.data(), sorted[size_t(cand[k])]);
      else if (esc)
        e->uncertain.push_back(cand[k]);
    });
  } else {
    e->accepted.assign(vocab_->mask_words(), 0);
    walk_dfa(m, *vocab_, cls_, ncls_, sorted.size(), [](size_t k) { return k; }, [&](size_t k, bool ok, bool esc) {
      if (ok)
        set_bit(e->accepted.data(), sorted[k]);
      else if (esc)
        e->uncertain.push_back(int32_t(k));
    });
  }
  return insert(key, std::move(e), t0);
}

const CompiledGrammar::Entry& CompiledGrammar::insert(std::string key, std::unique_ptr<Entry> e,
                                                      std::chrono::steady_clock::time_point t0) const {
  size_t n = 0;
  for (uint32_t w : e->accepted) n += size_t(std::popcount(w));
  if (n < e->accepted.size()) {
    for (size_t w = 0; w < e->accepted.size(); ++w)
      for (uint32_t bits = e->accepted[w]; bits; bits &= bits - 1)
        e->accepted_ids.push_back(int32_t(w * 32 + size_t(std::countr_zero(bits))));
    e->accepted = {};
  }
  e->uncertain.shrink_to_fit();
  entries_.fetch_add(1, std::memory_order_relaxed);
  entry_bytes_.fetch_add(long(4 * (e->accepted.size() + e->accepted_ids.size() + e->uncertain.size())),
                         std::memory_order_relaxed);
  entry_us_.fetch_add(long(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count()),
                      std::memory_order_relaxed);
  std::lock_guard lock(mu_);
  building_.erase(key);
  auto& slot = cache_[std::move(key)];
  if (!slot) slot = std::move(e);
  built_.notify_all();
  return *slot;
}

const CompiledGrammar::Entry* CompiledGrammar::find_or_claim(const std::string& key) const {
  std::unique_lock lock(mu_);
  for (;;) {
    if (auto it = cache_.find(key); it != cache_.end()) return it->second.get();
    if (building_.insert(key).second) return nullptr;
    built_.wait(lock);
  }
}

// Releases a claim whose build did not finish (an exception): a waiter then builds it itself.
// After insert() the key is gone from building_ and this does nothing.
CompiledGrammar::Claim::~Claim() {
  std::lock_guard lock(g->mu_);
  if (g->building_.erase(*key)) g->built_.notify_all();
}

const CompiledGrammar::Entry& CompiledGrammar::narrowed(const std::vector<int32_t>& top_down, bool complete,
                                                        const Entry& canon) const {
  std::string key(reinterpret_cast<const char*>(top_down.data()), top_down.size() * sizeof(int32_t));
  key += complete ? "CN" : "N";
  if (const Entry* hit = find_or_claim(key)) return *hit;
  Claim claim{this, &key};
  const auto t0 = std::chrono::steady_clock::now();
  // Tokens that could run out of a chain's repetitions (Grammar::ChainPos).
  const auto& sorted = vocab_->sorted();
  std::vector<uint32_t> risky((sorted.size() + 31) / 32, 0);  // over indices into sorted()
  for (int32_t p : top_down) {
    const Grammar::ChainPos& c = grammar_.chain(p);
    if (c.canon < 0) continue;
    for (auto [n, k] : counts_.at(c.first)) {
      if (n < c.reps) break;
      set_bit(risky.data(), k);
    }
  }
  auto e = std::make_unique<Entry>();
  accepted_bits(canon, e->accepted);
  std::vector<int32_t> walk_these;
  for (size_t w = 0; w < risky.size(); ++w)
    for (uint32_t bits = risky[w]; bits; bits &= bits - 1) {
      const int32_t k = int32_t(w * 32 + size_t(std::countr_zero(bits)));
      const int32_t id = sorted[size_t(k)];
      if (get_bit(e->accepted.data(), id)) {
        e->accepted[size_t(id) / 32] &= ~(1u << (uint32_t(id) % 32));
        walk_these.push_back(k);
      } else if (std::binary_search(canon.uncertain.begin(), canon.uncertain.end(), k)) {
        walk_these.push_back(k);
      }
    }
  std::vector<int32_t> uncertain;
  for (int32_t k : canon.uncertain)
    if (!get_bit(risky.data(), k)) uncertain.push_back(k);
  if (walk_these.size() <= few_) {
    e->uncertain.resize(uncertain.size() + walk_these.size());
    std::merge(uncertain.begin(), uncertain.end(), walk_these.begin(), walk_these.end(), e->uncertain.begin());
  } else {
    // The rejected tokens stay rejected: a stack at a shorter rule takes less.
    Matcher m = Matcher::at_stack(grammar_, top_down, complete);
    std::vector<int32_t> escaped;
    walk_dfa(m, *vocab_, cls_, ncls_, walk_these.size(), [&](size_t k) { return walk_these[k]; },
             [&](size_t k, bool ok, bool esc) {
               if (ok)
                 set_bit(e->accepted.data(), sorted[size_t(walk_these[k])]);
               else if (esc)
                 escaped.push_back(walk_these[k]);
             });
    e->uncertain.resize(uncertain.size() + escaped.size());
    std::merge(uncertain.begin(), uncertain.end(), escaped.begin(), escaped.end(), e->uncertain.begin());
  }
  return insert(key, std::move(e), t0);
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

void CompiledGrammar::accepted_bits(const Entry& e, std::vector<uint32_t>& bits) const {
  if (!e.accepted.empty()) {
    bits = e.accepted;
    return;
  }
  bits.assign(vocab_->mask_words(), 0);
  for (int32_t t : e.accepted_ids) set_bit(bits.data(), t);
}

void CompiledGrammar::canonical(const std::vector<int32_t>& stack, std::vector<int32_t>& canon) const {
  canon = stack;
  for (int32_t& p : canon)
    if (grammar_.chain(p).canon >= 0) p = grammar_.chain(p).canon;
}

// The shallowest entry that leaves few tokens uncertain (deeper ones are more specific, so fewer
// stacks share them). Below a chain frame (Grammar::chain) an entry comes from its frames' entry
// at their chains' longest rules (`c`), narrowed, unless the entry of one frame fewer leaves few
// enough tokens to walk against the real frames.
bool CompiledGrammar::deepen(Level& lv, const std::vector<int32_t>& stack, const std::vector<int32_t>& canon,
                             size_t k, bool complete, bool last) const {
  const std::vector<int32_t> top(stack.begin(), stack.begin() + ptrdiff_t(k));
  lv.aliased = lv.aliased || canon[k - 1] != stack[k - 1];
  if (!lv.aliased) {
    lv.e = lv.c = &entry(top, complete, lv.e);
  } else if (lv.e && lv.e->uncertain.size() <= few_ * kWalkFew) {
    lv.e = &entry(top, complete, lv.e);
  } else {
    lv.c = &entry(std::vector<int32_t>(canon.begin(), canon.begin() + ptrdiff_t(k)), complete, lv.c);
    lv.e = lv.c->uncertain.size() <= few_ || last ? &narrowed(top, complete, *lv.c) : nullptr;
  }
  return lv.e && lv.e->uncertain.size() <= few_;
}

void CompiledGrammar::compute_mask(Matcher& m, uint32_t* mask) const {
  const TokenVocab& v = *vocab_;
  std::memset(mask, 0, v.mask_words() * sizeof(uint32_t));
  std::vector<const Entry*> used;
  std::vector<int32_t> stack, canon, candidates;
  for (size_t h = 0; h < m.num_heads(); ++h) {
    const bool whole = m.head_stack(h, kMaxDepth, stack);
    canonical(stack, canon);
    Level lv;
    for (size_t k = 1; k <= stack.size(); ++k)
      if (deepen(lv, stack, canon, k, whole && k == stack.size(), k == stack.size())) break;
    used.push_back(lv.e);
  }
  // Sorted and deduplicated once: a long enum has one entry per alternative, and a search per
  // head made the first mask quadratic in them.
  std::sort(used.begin(), used.end());
  used.erase(std::unique(used.begin(), used.end()), used.end());
  for (const Entry* e : used) {
    const size_t words = e->accepted.size();
    for (size_t w = 0; w < words; ++w) mask[w] |= e->accepted[w];
    for (int32_t t : e->accepted_ids) set_bit(mask, t);
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

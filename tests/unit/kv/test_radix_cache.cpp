// RadixCache (prefix tree over token ids -> KV slots): matching, inserting, edge splits, LRU
// eviction that never takes a slot a request holds, refcount bookkeeping against KvPool, and a
// randomized model check against a brute-force map of every cached prefix.
#include <gtest/gtest.h>

#include <algorithm>
#include <climits>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "kv/kv_pool.h"
#include "kv/radix_cache.h"

using lite_llama::kv::KvPool;
using lite_llama::kv::RadixCache;
using Tokens = std::vector<int32_t>;

namespace {

// Every cached prefix (tokens[0, i]) -> the slot of its last token.
std::map<Tokens, int32_t> contents(const RadixCache& c) {
  std::map<Tokens, int32_t> m;
  c.for_each_path([&](const Tokens& t, const Tokens& s) {
    for (size_t i = 0; i < t.size(); ++i) m[Tokens(t.begin(), t.begin() + long(i) + 1)] = s[i];
  });
  return m;
}

// A request that computed `tokens` into fresh slots, cached them and let go of its own refs.
Tokens cache_sequence(KvPool& pool, RadixCache& c, const Tokens& tokens) {
  Tokens slots;
  EXPECT_TRUE(pool.alloc(int32_t(tokens.size()), slots));
  c.insert(tokens.data(), slots.data(), int32_t(tokens.size()));
  pool.release(slots.data(), int32_t(slots.size()));
  return slots;
}

int32_t match(RadixCache& c, const Tokens& t, Tokens* slots = nullptr) {
  Tokens s;
  const int32_t n = c.match(t.data(), int32_t(t.size()), s);
  EXPECT_EQ(int32_t(s.size()), n);
  if (slots) *slots = s;
  return n;
}

}  // namespace

TEST(RadixCache, EmptyCacheMatchesNothing) {
  KvPool pool(8);
  RadixCache c(pool);
  Tokens out = {42};
  const Tokens t = {1, 2, 3};
  EXPECT_EQ(c.match(t.data(), 3, out), 0);
  EXPECT_EQ(out, Tokens{42});
  EXPECT_EQ(c.match(t.data(), 0, out), 0);
  EXPECT_EQ(c.cached_tokens(), 0);
  EXPECT_EQ(c.num_nodes(), 0);
  EXPECT_EQ(c.evict(5), 0);
  c.validate();
}

TEST(RadixCache, InsertRetainsAndMatchReturnsLongestPrefix) {
  KvPool pool(16);
  RadixCache c(pool);
  const Tokens t = {1, 2, 3, 4};
  Tokens slots;
  ASSERT_TRUE(pool.alloc(4, slots));
  EXPECT_EQ(c.insert(t.data(), slots.data(), 4), 4);
  for (int32_t s : slots) EXPECT_EQ(pool.refcount(s), 2) << "caller + tree";
  pool.release(slots.data(), 4);
  for (int32_t s : slots) EXPECT_EQ(pool.refcount(s), 1) << "tree only";
  EXPECT_EQ(c.cached_tokens(), 4);
  EXPECT_EQ(pool.num_used(), 4);

  Tokens got;
  EXPECT_EQ(match(c, {1, 2, 3, 4, 5}, &got), 4);
  EXPECT_EQ(got, slots);
  EXPECT_EQ(match(c, {1, 2, 3, 4}, &got), 4);
  EXPECT_EQ(match(c, {7, 1, 2}), 0);
  EXPECT_EQ(c.num_nodes(), 1);
  // A match ending inside the edge splits it.
  EXPECT_EQ(match(c, {1, 2, 9}, &got), 2);
  EXPECT_EQ(got, Tokens(slots.begin(), slots.begin() + 2));
  EXPECT_EQ(c.num_nodes(), 2);
  // The limit n caps the match (the scheduler passes n - 1).
  Tokens out = {99};
  EXPECT_EQ(c.match(t.data(), 3, out), 3);
  EXPECT_EQ(out, (Tokens{99, slots[0], slots[1], slots[2]})) << "appends";
  EXPECT_EQ(c.num_nodes(), 3);
  EXPECT_EQ(c.cached_tokens(), 4) << "splits move no slot";
  for (int32_t s : slots) EXPECT_EQ(pool.refcount(s), 1) << "match takes no reference";
  c.validate();
}

TEST(RadixCache, SharedPrefixIsNotDuplicated) {
  KvPool pool(32);
  RadixCache c(pool);
  const Tokens a = cache_sequence(pool, c, {1, 2, 3, 4});
  Tokens b;
  ASSERT_TRUE(pool.alloc(4, b));
  const Tokens bt = {1, 2, 5, 6};
  EXPECT_EQ(c.insert(bt.data(), b.data(), 4), 2) << "only the new suffix";
  EXPECT_EQ(pool.refcount(b[0]), 1) << "the tree keeps its own slot for a cached token";
  EXPECT_EQ(pool.refcount(b[1]), 1);
  EXPECT_EQ(pool.refcount(b[2]), 2);
  EXPECT_EQ(pool.refcount(b[3]), 2);
  pool.release(b.data(), 4);  // the caller's copies of tokens 1, 2 go back to the pool
  EXPECT_EQ(pool.num_used(), 6);
  EXPECT_EQ(c.cached_tokens(), 6);
  EXPECT_EQ(c.num_nodes(), 3);  // [1 2] -> {[3 4], [5 6]}
  Tokens got;
  EXPECT_EQ(match(c, {1, 2, 5, 6, 7}, &got), 4);
  EXPECT_EQ(got, (Tokens{a[0], a[1], b[2], b[3]}));
  // A prefix of a cached sequence adds nothing (and splits at its end).
  const Tokens p = {1, 2, 3};
  Tokens ps;
  ASSERT_TRUE(pool.alloc(3, ps));
  EXPECT_EQ(c.insert(p.data(), ps.data(), 3), 0);
  pool.release(ps.data(), 3);
  EXPECT_EQ(c.cached_tokens(), 6);
  EXPECT_EQ(c.num_nodes(), 4);
  EXPECT_EQ(c.stats().inserted_tokens, 6);
  c.validate();
}

TEST(RadixCache, ChildrenStaySortedWhateverTheInsertOrder) {
  KvPool pool(256);
  RadixCache c(pool);
  const int32_t firsts[] = {50, 3, 99, -7, 12, 0, 64, 1};
  for (int32_t f : firsts) cache_sequence(pool, c, {f, 5, 6});
  for (int32_t f : firsts) cache_sequence(pool, c, {5, f});  // under one node after splits
  c.validate();
  for (int32_t f : firsts) {
    EXPECT_EQ(match(c, {f, 5, 6}), 3);
    EXPECT_EQ(match(c, {5, f, 1}), 2);
  }
  EXPECT_EQ(c.cached_tokens(), 8 * 3 + 1 + 8);
}

TEST(RadixCache, EvictsLeastRecentlyUsedFirst) {
  KvPool pool(64);
  RadixCache c(pool);
  cache_sequence(pool, c, {1, 1, 1});  // oldest
  cache_sequence(pool, c, {2, 2, 2});
  cache_sequence(pool, c, {3, 3, 3});
  EXPECT_EQ(match(c, {1, 1, 1}), 3);  // 1 is now the most recent, 2 the least
  EXPECT_EQ(c.evict(3), 3);
  EXPECT_EQ(match(c, {2, 2, 2}), 0);
  EXPECT_EQ(match(c, {1, 1, 1}), 3);
  EXPECT_EQ(match(c, {3, 3, 3}), 3);  // now 1 is the oldest
  EXPECT_EQ(c.evict(3), 3);
  EXPECT_EQ(match(c, {1, 1, 1}), 0);
  EXPECT_EQ(match(c, {3, 3, 3}), 3);
  EXPECT_EQ(c.stats().evicted_tokens, 6);
  EXPECT_EQ(pool.num_used(), 3);
  c.validate();
}

TEST(RadixCache, EvictionTakesALeafTailFirstAndParentsAfterTheirChildren) {
  KvPool pool(64);
  RadixCache c(pool);
  const Tokens s = cache_sequence(pool, c, {1, 2, 3, 4, 5});
  cache_sequence(pool, c, {1, 2, 3, 9});  // [1 2 3] -> {[4 5], [9]}; [9] is newer
  EXPECT_EQ(c.evict(1), 1);
  EXPECT_EQ(pool.refcount(s[4]), 0) << "the oldest leaf's last token went first";
  EXPECT_EQ(match(c, {1, 2, 3, 9}), 4);
  EXPECT_EQ(match(c, {1, 2, 3, 4, 5}), 4);  // now [4] is the newest leaf
  EXPECT_EQ(c.evict(1), 1);
  EXPECT_EQ(match(c, {1, 2, 3, 9}), 3);
  EXPECT_EQ(match(c, {1, 2, 3, 4}), 4);
  // [4] goes, then its parent [1 2 3], a leaf now, from its tail.
  EXPECT_EQ(c.evict(2), 2);
  EXPECT_EQ(match(c, {1, 2, 3, 4}), 2);
  EXPECT_EQ(c.num_nodes(), 1);
  EXPECT_EQ(c.cached_tokens(), 2);
  EXPECT_EQ(c.evict(100), 2) << "returns what it freed, not what was asked";
  EXPECT_EQ(c.num_nodes(), 0);
  EXPECT_EQ(pool.num_free(), 64);
  c.validate();
}

TEST(RadixCache, NeverEvictsWhatARequestHolds) {
  KvPool pool(64);
  RadixCache c(pool);
  cache_sequence(pool, c, {1, 2, 3, 4, 5});
  cache_sequence(pool, c, {1, 2, 3, 6});
  cache_sequence(pool, c, {8, 8});
  // A request takes [1 2 3 4] (match, then its own reference) and computes one more token.
  Tokens held;
  const Tokens req = {1, 2, 3, 4, 7};
  ASSERT_EQ(c.match(req.data(), 5, held), 4);
  pool.retain(held.data(), 4);
  ASSERT_TRUE(pool.alloc(1, held));
  EXPECT_EQ(c.num_evictable(), 4) << "[5], [6], [8 8]";
  EXPECT_EQ(c.evict(INT32_MAX), 4);
  EXPECT_EQ(c.num_evictable(), 0);
  EXPECT_EQ(c.cached_tokens(), 4);
  Tokens got;
  EXPECT_EQ(match(c, {1, 2, 3, 4, 5}, &got), 4);
  EXPECT_EQ(got, Tokens(held.begin(), held.begin() + 4));
  for (int i = 0; i < 4; ++i) EXPECT_EQ(pool.refcount(held[size_t(i)]), 2);
  // Finished: cache it, let go; everything is evictable now.
  c.insert(req.data(), held.data(), 5);
  pool.release(held.data(), 5);
  EXPECT_EQ(c.num_evictable(), 5);
  EXPECT_EQ(c.evict(INT32_MAX), 5);
  EXPECT_EQ(pool.num_free(), 64);
  c.validate();
}

TEST(RadixCache, ResetDropsOnlyTheTreesReferences) {
  KvPool pool(16);
  RadixCache c(pool);
  cache_sequence(pool, c, {1, 2, 3});
  Tokens held;
  const Tokens t = {1, 2};
  c.match(t.data(), 2, held);
  pool.retain(held.data(), 2);
  c.reset();
  EXPECT_EQ(c.cached_tokens(), 0);
  EXPECT_EQ(c.num_nodes(), 0);
  EXPECT_EQ(pool.num_used(), 2);
  pool.release(held.data(), 2);
  EXPECT_EQ(pool.num_free(), 16);
  cache_sequence(pool, c, {4});  // usable after a reset
  EXPECT_EQ(match(c, {4}), 1);
  c.validate();
}

TEST(RadixCache, DeepChainsNeedNoRecursion) {
  // Inserting ever longer prefixes of one sequence grows a chain one node per insert.
  const int n = 8000;  // quadratic to build (each insert walks the chain)
  KvPool pool(n);
  RadixCache c(pool);
  Tokens t, slots;
  for (int i = 0; i < n; ++i) {
    t.push_back(i % 7);
    ASSERT_TRUE(pool.alloc(1, slots));
    c.insert(t.data(), slots.data(), int32_t(t.size()));
  }
  pool.release(slots.data(), n);
  EXPECT_EQ(c.num_nodes(), n);
  EXPECT_EQ(c.num_evictable(), n);
  Tokens got;
  EXPECT_EQ(c.match(t.data(), n, got), n);
  EXPECT_EQ(got, slots);
  c.validate();
  EXPECT_EQ(c.evict(INT32_MAX), n);
  EXPECT_EQ(pool.num_free(), n);
}

TEST(RadixCache, StatsCountLookupsInsertsAndEvictions) {
  KvPool pool(16);
  RadixCache c(pool);
  cache_sequence(pool, c, {1, 2, 3});
  c.record_lookup(5, 3);
  c.record_lookup(4, 0);
  c.evict(2);
  EXPECT_EQ(c.stats().queried_tokens, 9);
  EXPECT_EQ(c.stats().hit_tokens, 3);
  EXPECT_EQ(c.stats().inserted_tokens, 3);
  EXPECT_EQ(c.stats().evicted_tokens, 2);
}

// Random requests over a tiny alphabet (so prefixes are shared a lot) start from a match, take
// fresh slots for the rest, cache themselves while running or when done, and random evictions
// run in between. After every operation the tree must hold exactly the brute-force model's
// prefixes, every match must be the longest one with the right slots, and every slot's refcount
// must be (requests holding it) + (1 if cached).
TEST(RadixCache, RandomOperationsAgreeWithABruteForceModel) {
  struct Req {
    Tokens tokens, slots;  // slots: one reference each, the request's own
  };
  int64_t total_hits = 0, total_evicted = 0, total_held_skips = 0;
  for (uint64_t seed = 0; seed < 200; ++seed) {
    SCOPED_TRACE(::testing::Message() << "seed " << seed);
    std::mt19937_64 rng(seed);
    auto uni = [&](int lo, int hi) { return int(std::uniform_int_distribution<int>(lo, hi)(rng)); };
    const int32_t num_slots = uni(24, 160);
    const int alphabet = uni(2, 4), max_len = uni(2, 24);
    KvPool pool(num_slots);
    RadixCache c(pool);
    std::map<Tokens, int32_t> model;
    // The prefix each slot's K/V was computed for.
    std::vector<Tokens> slot_prefix(static_cast<size_t>(num_slots));
    std::vector<Req> reqs;

    auto check = [&] {
      c.validate();
      ASSERT_EQ(contents(c), model);
      std::vector<int32_t> refs(size_t(num_slots), 0);
      for (const Req& r : reqs)
        for (int32_t s : r.slots) ++refs[size_t(s)];
      for (const auto& [p, s] : model) ++refs[size_t(s)];
      for (int32_t s = 0; s < num_slots; ++s) ASSERT_EQ(pool.refcount(s), refs[size_t(s)]) << s;
      ASSERT_EQ(c.cached_tokens(), int32_t(model.size()));
    };
    auto insert = [&](const Req& r, int32_t n) {
      int32_t expect = 0;
      for (int32_t i = 0; i < n; ++i) {
        Tokens p(r.tokens.begin(), r.tokens.begin() + i + 1);
        if (model.emplace(p, r.slots[size_t(i)]).second) ++expect;
      }
      ASSERT_EQ(c.insert(r.tokens.data(), r.slots.data(), n), expect);
    };

    for (int op = 0; op < 300; ++op) {
      const int kind = uni(0, 9);
      if (kind <= 3) {  // a request arrives
        Req r;
        const int len = uni(1, max_len);
        for (int i = 0; i < len; ++i) r.tokens.push_back(uni(0, alphabet - 1));
        const int32_t limit = uni(0, 1) ? len : len - 1;
        int32_t best = 0;
        while (best < limit && model.count(Tokens(r.tokens.begin(), r.tokens.begin() + best + 1)))
          ++best;
        const int32_t m = c.match(r.tokens.data(), limit, r.slots);
        ASSERT_EQ(m, best);
        for (int32_t i = 0; i < m; ++i) {
          const Tokens p(r.tokens.begin(), r.tokens.begin() + i + 1);
          ASSERT_EQ(r.slots[size_t(i)], model.at(p));
          ASSERT_EQ(slot_prefix[size_t(r.slots[size_t(i)])], p) << "cached KV of another prefix";
        }
        pool.retain(r.slots.data(), m);
        total_hits += m;
        const int32_t need = len - m;
        if (pool.num_free() < need) {
          const int32_t missing = need - pool.num_free();
          const int32_t can = c.num_evictable();
          ASSERT_LE(can, c.num_unheld()) << "the scheduler's O(1) bound";
          if (can >= missing) {
            ASSERT_EQ(c.evict(missing), missing);
          } else {
            ASSERT_EQ(c.evict(INT32_MAX), can);
            ++total_held_skips;
          }
          model = contents(c);
        }
        if (!pool.alloc(need, r.slots)) {
          pool.release(r.slots.data(), m);
          check();
          continue;
        }
        for (int32_t i = m; i < len; ++i) {
          const Tokens p(r.tokens.begin(), r.tokens.begin() + i + 1);
          slot_prefix[size_t(r.slots[size_t(i)])] = p;
        }
        reqs.push_back(std::move(r));
      } else if (kind <= 5 && !reqs.empty()) {  // a request finishes (or is preempted)
        const size_t i = size_t(uni(0, int(reqs.size()) - 1));
        const Req& r = reqs[i];
        insert(r, uni(0, 3) ? int32_t(r.tokens.size()) : uni(0, int(r.tokens.size())));
        pool.release(r.slots.data(), int32_t(r.slots.size()));
        reqs.erase(reqs.begin() + long(i));
      } else if (kind == 6 && !reqs.empty()) {  // a running request caches its prefill
        const Req& r = reqs[size_t(uni(0, int(reqs.size()) - 1))];
        insert(r, uni(1, int(r.tokens.size())));
      } else {  // evict some
        const int32_t can = c.num_evictable();
        ASSERT_LE(can, c.num_unheld());
        const int32_t want = uni(0, 2) ? uni(1, 12) : INT32_MAX;
        const std::map<Tokens, int32_t> before = model;
        ASSERT_EQ(c.evict(want), std::min(want, can));
        model = contents(c);
        int32_t gone = 0;
        for (const auto& [p, s] : before) {
          auto it = model.find(p);
          if (it != model.end()) {
            ASSERT_EQ(it->second, s);
            continue;
          }
          ASSERT_EQ(pool.refcount(s), 0) << "evicted slot " << s << " that a request holds";
          ++gone;
        }
        ASSERT_EQ(gone, std::min(want, can));
        total_evicted += gone;
      }
      check();
      if (::testing::Test::HasFatalFailure()) return;
    }
    // Everyone lets go without caching; then the cache empties completely.
    for (const Req& r : reqs) pool.release(r.slots.data(), int32_t(r.slots.size()));
    reqs.clear();
    EXPECT_EQ(c.num_evictable(), c.cached_tokens());
    EXPECT_EQ(c.evict(INT32_MAX), int32_t(model.size()));
    EXPECT_EQ(c.cached_tokens(), 0);
    EXPECT_EQ(c.num_nodes(), 0);
    EXPECT_EQ(pool.num_free(), num_slots);
  }
  RecordProperty("hit_tokens", std::to_string(total_hits));
  RecordProperty("evicted_tokens", std::to_string(total_evicted));
  RecordProperty("held_skips", std::to_string(total_held_skips));
  EXPECT_GT(total_hits, 10000);
  EXPECT_GT(total_evicted, 5000);
  EXPECT_GT(total_held_skips, 1000) << "the workloads must run into slots held by requests";
}

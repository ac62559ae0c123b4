// KvPool (token slots with refcounts) and ReqRows (request-table rows): allocation order,
// exhaustion without side effects, refcounting, misuse detection, and a random model check.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <vector>

#include "kv/kv_pool.h"

using lite_llama::kv::KvPool;
using lite_llama::kv::ReqRows;

TEST(KvPool, FreshPoolHandsOutLowestSlotsInOrder) {
  KvPool p(8);
  EXPECT_EQ(p.num_slots(), 8);
  EXPECT_EQ(p.num_free(), 8);
  EXPECT_EQ(p.num_used(), 0);
  std::vector<int32_t> out;
  ASSERT_TRUE(p.alloc(3, out));
  EXPECT_EQ(out, (std::vector<int32_t>{0, 1, 2}));
  for (int32_t s : out) EXPECT_EQ(p.refcount(s), 1);
  EXPECT_EQ(p.refcount(3), 0);
  EXPECT_EQ(p.num_free(), 5);
  EXPECT_EQ(p.num_used(), 3);
  ASSERT_TRUE(p.alloc(2, out));  // appends
  EXPECT_EQ(out, (std::vector<int32_t>{0, 1, 2, 3, 4}));
}

TEST(KvPool, ExhaustionFailsWithoutSideEffects) {
  KvPool p(5);
  std::vector<int32_t> out = {77};
  ASSERT_TRUE(p.alloc(4, out));
  const std::vector<int32_t> before = out;
  EXPECT_FALSE(p.alloc(2, out));
  EXPECT_EQ(out, before);
  EXPECT_EQ(p.num_free(), 1);
  EXPECT_FALSE(p.alloc(-1, out));
  EXPECT_EQ(out, before);
  EXPECT_TRUE(p.alloc(0, out));
  EXPECT_EQ(out, before);
  ASSERT_TRUE(p.alloc(1, out));  // exactly the last one
  EXPECT_EQ(p.num_free(), 0);
  EXPECT_FALSE(p.alloc(1, out));
  std::set<int32_t> all(out.begin() + 1, out.end());
  EXPECT_EQ(all, (std::set<int32_t>{0, 1, 2, 3, 4}));
}

TEST(KvPool, ReleaseReturnsSlotsMostRecentFirst) {
  KvPool p(6);
  std::vector<int32_t> a;
  ASSERT_TRUE(p.alloc(6, a));
  const int32_t rel[] = {4, 1};
  p.release(rel, 2);
  EXPECT_EQ(p.num_free(), 2);
  EXPECT_EQ(p.refcount(4), 0);
  EXPECT_EQ(p.refcount(1), 0);
  const int32_t five = 5;
  p.release(&five, 1);
  std::vector<int32_t> b;
  ASSERT_TRUE(p.alloc(3, b));
  EXPECT_EQ(b, (std::vector<int32_t>{5, 4, 1}));  // the last release first, each in its own order
}

// A request's run of slots, released and taken again, is one ascending run again (the decode
// attention reads such a run without the slot table: Sequence::leading_run).
TEST(KvPool, ReleasedRunComesBackInOrder) {
  KvPool p(10);
  std::vector<int32_t> a, b, c;
  ASSERT_TRUE(p.alloc(3, a));  // 0 1 2
  ASSERT_TRUE(p.alloc(5, b));  // 3..7
  p.release(b.data(), 5);
  ASSERT_TRUE(p.alloc(5, c));
  EXPECT_EQ(c, (std::vector<int32_t>{3, 4, 5, 6, 7}));
  std::vector<int32_t> d;
  p.cache_retain(c.data(), 5);  // the prefix cache's reference, dropped last
  p.release(c.data(), 5);
  p.cache_release(c.data(), 5);
  ASSERT_TRUE(p.alloc(5, d));
  EXPECT_EQ(d, (std::vector<int32_t>{3, 4, 5, 6, 7}));
}

TEST(KvPool, RetainKeepsSharedSlotsUntilLastRelease) {
  KvPool p(4);
  std::vector<int32_t> s;
  ASSERT_TRUE(p.alloc(2, s));
  p.retain(s.data(), 2);
  EXPECT_EQ(p.refcount(s[0]), 2);
  p.release(s.data(), 2);
  EXPECT_EQ(p.refcount(s[0]), 1);
  EXPECT_EQ(p.num_free(), 2);  // still held by the other owner
  p.release(s.data(), 2);
  EXPECT_EQ(p.num_free(), 4);
  EXPECT_EQ(p.refcount(s[1]), 0);
}

TEST(KvPool, MisuseThrows) {
  EXPECT_THROW(KvPool(0), std::runtime_error);
  EXPECT_THROW(KvPool(-3), std::runtime_error);
  KvPool p(3);
  std::vector<int32_t> s;
  ASSERT_TRUE(p.alloc(1, s));
  const int32_t free_slot = 2, out_of_range = 3, negative = -1;
  EXPECT_THROW(p.release(&free_slot, 1), std::runtime_error);
  EXPECT_THROW(p.release(&out_of_range, 1), std::runtime_error);
  EXPECT_THROW(p.release(&negative, 1), std::runtime_error);
  EXPECT_THROW(p.retain(&free_slot, 1), std::runtime_error);
  EXPECT_THROW(p.retain(&out_of_range, 1), std::runtime_error);
  p.release(s.data(), 1);
  EXPECT_THROW(p.release(s.data(), 1), std::runtime_error);  // double free
  EXPECT_EQ(p.num_free(), 3);
}

TEST(KvPool, RandomOperationsMatchAModel) {
  std::mt19937 rng(42);
  const int32_t N = 50;
  KvPool p(N);
  std::map<int32_t, int> refs;  // the model: slot -> refcount (absent = free)
  std::vector<int32_t> held;    // one entry per reference we own
  for (int step = 0; step < 20000; ++step) {
    const int op = int(rng() % 3);
    if (op == 0) {
      const int32_t n = int32_t(rng() % 8);
      std::vector<int32_t> out;
      const bool ok = p.alloc(n, out);
      ASSERT_EQ(ok, n <= N - int32_t(refs.size())) << "step " << step;
      if (ok) {
        ASSERT_EQ(out.size(), size_t(n));
        for (int32_t s : out) {
          ASSERT_TRUE(s >= 0 && s < N);
          ASSERT_EQ(refs.count(s), 0u) << "slot " << s << " handed out twice";
          refs[s] = 1;
          held.push_back(s);
        }
      } else {
        ASSERT_TRUE(out.empty());
      }
    } else if (op == 1 && !held.empty()) {
      const size_t i = rng() % held.size();
      const int32_t s = held[i];
      held.erase(held.begin() + long(i));
      p.release(&s, 1);
      if (--refs[s] == 0) refs.erase(s);
    } else if (op == 2 && !held.empty()) {
      const int32_t s = held[rng() % held.size()];
      p.retain(&s, 1);
      ++refs[s];
      held.push_back(s);
    }
    ASSERT_EQ(p.num_used(), int32_t(refs.size()));
    ASSERT_EQ(p.num_free(), N - int32_t(refs.size()));
    if (step % 97 == 0) {
      for (int32_t s = 0; s < N; ++s) ASSERT_EQ(p.refcount(s), refs.count(s) ? refs[s] : 0);
    }
  }
}

TEST(ReqRows, AllocUntilFullThenRecycle) {
  ReqRows r(3);
  EXPECT_EQ(r.capacity(), 3);
  EXPECT_EQ(r.num_free(), 3);
  std::set<int32_t> got;
  for (int i = 0; i < 3; ++i) {
    int32_t row = r.alloc();
    ASSERT_TRUE(row >= 0 && row < 3);
    got.insert(row);
  }
  EXPECT_EQ(got.size(), 3u);
  EXPECT_EQ(r.num_free(), 0);
  EXPECT_EQ(r.alloc(), -1);
  EXPECT_EQ(r.num_free(), 0);
  r.release(1);
  EXPECT_EQ(r.num_free(), 1);
  EXPECT_EQ(r.alloc(), 1);
}

TEST(ReqRows, MisuseThrows) {
  EXPECT_THROW(ReqRows(0), std::runtime_error);
  ReqRows r(2);
  EXPECT_THROW(r.release(0), std::runtime_error);  // not in use
  int32_t row = r.alloc();
  EXPECT_THROW(r.release(2), std::runtime_error);
  EXPECT_THROW(r.release(-1), std::runtime_error);
  r.release(row);
  EXPECT_THROW(r.release(row), std::runtime_error);  // twice
  EXPECT_EQ(r.num_free(), 2);
}

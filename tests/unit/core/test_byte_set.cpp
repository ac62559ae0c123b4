// ByteSet::find against a plain loop, for sets of 0 to 6 bytes (memchr, SSE2 / 8-byte words,
// and the byte-by-byte path) and every start position.
#include <gtest/gtest.h>

#include <random>
#include <string>

#include "core/byte_set.h"

using lite_llama::ByteSet;

TEST(ByteSet, FindMatchesPlainLoop) {
  std::mt19937 rng(3);
  for (int n = 0; n <= 6; ++n) {
    for (int trial = 0; trial < 40; ++trial) {
      ByteSet set;
      bool in[256] = {};
      for (int k = 0; k < n; ++k) {
        const uint8_t b = uint8_t(rng() % 256);
        set.add(b);
        in[b] = true;
      }
      std::string s(size_t(rng() % 80), 'x');
      for (char& c : s) c = char(rng() % 23 == 0 ? rng() % 256 : 'a' + rng() % 26);
      for (size_t from = 0; from <= s.size() + 1; ++from) {
        size_t want = from;
        while (want < s.size() && !in[uint8_t(s[want])]) ++want;
        want = std::min(want, s.size());
        ASSERT_EQ(set.find(s, from), want) << "n " << n << " from " << from << " in " << s;
      }
      for (int b = 0; b < 256; ++b) EXPECT_EQ(set.contains(uint8_t(b)), in[b]);
    }
  }
}

TEST(ByteSet, LongTextWithOneHit) {
  for (size_t at : {0, 7, 8, 15, 16, 17, 1000, 4095}) {
    std::string s(4096, 'w');
    s[at] = '<';
    for (const char* members : {"<", "<\xEF", "<\xEF|", "<\xEF|>", "<\xEF|>!"}) {
      ByteSet set;
      for (const char* m = members; *m; ++m) set.add(uint8_t(*m));
      EXPECT_EQ(set.find(s, 0), at) << members;
      EXPECT_EQ(set.find(s, at + 1), s.size()) << members;
    }
  }
}

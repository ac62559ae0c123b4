// A set of byte values and a fast search for the next of them in a text. Special-token
// matchers use it to skip to where a token could start: their tokens begin with one or two
// distinct bytes ('<' mostly), and testing every byte of a 20 KB chat prompt costs ~2 ns each.
#pragma once
#include <array>
#include <cstdint>
#include <cstring>
#include <string_view>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace lite_llama {

class ByteSet {
 public:
  void add(uint8_t b) {
    if (in_[b]) return;
    in_[b] = true;
    if (n_ < 4) {
      few_[size_t(n_)] = b;
      for (size_t k = size_t(n_) + 1; k < 4; ++k) few_[k] = few_[0];  // repeats test nothing new
    }
    ++n_;
  }
  bool contains(uint8_t b) const { return in_[b]; }

  // The first position >= from of a byte in the set, or s.size().
  size_t find(std::string_view s, size_t from) const {
    if (n_ == 0 || from >= s.size()) return s.size();
    const char* p = s.data();
    if (n_ == 1) {
      const void* hit = std::memchr(p + from, few_[0], s.size() - from);
      return hit ? size_t(static_cast<const char*>(hit) - p) : s.size();
    }
    size_t i = from;
    if (n_ <= 4) {
#if defined(__SSE2__)
      const __m128i a = _mm_set1_epi8(char(few_[0])), b = _mm_set1_epi8(char(few_[1]));
      const __m128i c = _mm_set1_epi8(char(few_[2])), d = _mm_set1_epi8(char(few_[3]));
      for (; i + 16 <= s.size(); i += 16) {
        const __m128i w = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + i));
        const __m128i eq = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(w, a), _mm_cmpeq_epi8(w, b)),
                                        _mm_or_si128(_mm_cmpeq_epi8(w, c), _mm_cmpeq_epi8(w, d)));
        if (const int m = _mm_movemask_epi8(eq)) return i + size_t(__builtin_ctz(unsigned(m)));
      }
#endif
      // Eight bytes at a time (without SSE2, or a tail of 8 to 15): one test a word.
      constexpr uint64_t kOnes = 0x0101010101010101ULL, kHighs = 0x8080808080808080ULL;
      for (; i + 8 <= s.size(); i += 8) {
        uint64_t w;
        std::memcpy(&w, p + i, 8);
        uint64_t hit = 0;
        for (uint8_t m : few_) {
          const uint64_t x = w ^ (kOnes * m);
          hit |= (x - kOnes) & ~x & kHighs;
        }
        if (hit) break;
      }
    }
    while (i < s.size() && !in_[uint8_t(p[i])]) ++i;
    return i;
  }

 private:
  std::array<bool, 256> in_{};
  std::array<uint8_t, 4> few_{};  // the first 4 members, the first repeated where fewer
  int n_ = 0;
};

}  // namespace lite_llama

// Strict UTF-8 (Unicode's table 3-7: no overlong forms, surrogates or code points past
// U+10FFFF), checked with ASCII runs skipped 8 bytes at a time.
#pragma once
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace lite_llama {

// Appends code point cp (<= U+10FFFF) as UTF-8.
inline void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += char(cp);
  } else if (cp < 0x800) {
    out += char(0xC0 | (cp >> 6));
    out += char(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += char(0xE0 | (cp >> 12));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  } else {
    out += char(0xF0 | ((cp >> 18) & 0x07));
    out += char(0x80 | ((cp >> 12) & 0x3F));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  }
}

// Length of the well-formed character at p (p < end), or 0.
inline int utf8_char_length(const unsigned char* p, const unsigned char* end) {
  auto in = [](unsigned char c, unsigned lo, unsigned hi) { return c >= lo && c <= hi; };
  const unsigned char c = p[0];
  if (c < 0x80) return 1;
  int n = 0;
  unsigned lo = 0x80, hi = 0xBF;  // the second byte's range
  if (in(c, 0xC2, 0xDF)) n = 2;
  else if (c == 0xE0) n = 3, lo = 0xA0;
  else if (in(c, 0xE1, 0xEC) || in(c, 0xEE, 0xEF)) n = 3;
  else if (c == 0xED) n = 3, hi = 0x9F;
  else if (c == 0xF0) n = 4, lo = 0x90;
  else if (in(c, 0xF1, 0xF3)) n = 4;
  else if (c == 0xF4) n = 4, hi = 0x8F;
  else return 0;
  if (end - p < n || !in(p[1], lo, hi)) return 0;
  for (int i = 2; i < n; ++i)
    if (!in(p[i], 0x80, 0xBF)) return 0;
  return n;
}

inline bool is_valid_utf8(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const auto* end = p + s.size();
  while (p < end) {
    uint64_t w;
    if (end - p >= 8 && (std::memcpy(&w, p, 8), (w & 0x8080808080808080ULL) == 0)) {
      p += 8;
      continue;
    }
    const int n = utf8_char_length(p, end);
    if (n == 0) return false;
    p += n;
  }
  return true;
}

}  // namespace lite_llama

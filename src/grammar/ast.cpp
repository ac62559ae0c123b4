#include "grammar/ast.h"

#include <algorithm>

#include "core/utf8.h"

namespace lite_llama::grammar {

void append_utf8(std::string& out, uint32_t cp) { ::lite_llama::append_utf8(out, cp); }

ExprPtr Expr::chars(std::vector<CodeRange> r) {
  auto e = make(Kind::Chars);
  e->ranges = std::move(r);
  return e;
}

ExprPtr Expr::ref(std::string name) {
  auto e = make(Kind::RuleRef);
  e->rule = std::move(name);
  return e;
}

ExprPtr Expr::repeat(ExprPtr x, int min, int max) {
  auto e = make(Kind::Repeat);
  e->items.push_back(std::move(x));
  e->min = min;
  e->max = max;
  return e;
}

ExprPtr Expr::literal(const std::string& utf8) {
  auto e = seq();
  for (size_t i = 0; i < utf8.size();) {
    const uint32_t cp = decode_utf8(utf8, i);
    e->items.push_back(chars({{cp, cp}}));
  }
  return e;
}

std::vector<CodeRange> normalize_ranges(std::vector<CodeRange> r, bool negate) {
  for (auto& c : r)
    if (c.lo > c.hi) std::swap(c.lo, c.hi);
  std::sort(r.begin(), r.end(), [](CodeRange a, CodeRange b) { return a.lo < b.lo; });
  std::vector<CodeRange> merged;
  for (const auto& c : r) {
    if (!merged.empty() && c.lo <= merged.back().hi + 1)
      merged.back().hi = std::max(merged.back().hi, c.hi);
    else
      merged.push_back(c);
  }
  if (!negate) return merged;
  std::vector<CodeRange> out;
  uint32_t next = 0;
  for (const auto& c : merged) {
    if (c.lo > next) out.push_back({next, c.lo - 1});
    next = c.hi + 1;
  }
  if (next <= 0x10FFFF) out.push_back({next, 0x10FFFF});
  return out;
}

uint32_t decode_utf8(const std::string& s, size_t& i) {
  const auto b0 = uint8_t(s[i]);
  int n = b0 < 0x80 ? 0 : (b0 >> 5) == 6 ? 1 : (b0 >> 4) == 14 ? 2 : (b0 >> 3) == 30 ? 3 : -1;
  if (n < 0 || i + size_t(n) >= s.size()) {
    ++i;
    return b0;
  }
  uint32_t cp = n == 0 ? b0 : n == 1 ? (b0 & 0x1F) : n == 2 ? (b0 & 0x0F) : (b0 & 0x07);
  for (int k = 1; k <= n; ++k) {
    const auto b = uint8_t(s[i + size_t(k)]);
    if ((b >> 6) != 2) {
      ++i;
      return b0;
    }
    cp = (cp << 6) | (b & 0x3F);
  }
  i += size_t(n) + 1;
  return cp;
}

}  // namespace lite_llama::grammar

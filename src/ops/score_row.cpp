#include "ops/score_row.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>
#include <vector>

namespace lite_llama::ops {

void score_row(const float* x, int64_t n, int32_t target, int k, RowScore* out, TopToken* top) {
  float mx = -std::numeric_limits<float>::infinity();
  int64_t am = 0;
  for (int64_t i = 0; i < n; ++i)
    if (x[i] > mx) mx = x[i], am = i;
  // Terms in float (each in (0, 1], rounded to 6e-8), summed in double: a double exp was most of a
  // CPU scoring pass over a 128k vocabulary.
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += double(std::exp(x[i] - mx));
  const float lse = mx + float(std::log(sum));
  const float lp = (target >= 0 && target < n ? x[target] : -std::numeric_limits<float>::infinity()) - lse;
  // Compared as the reported logprobs (x - lse in float), so a tie there is a tie here.
  int64_t above = 0;
  for (int64_t i = 0; i < n; ++i) above += (x[i] - lse) > lp;
  *out = RowScore{lp, int32_t(above + 1), int32_t(am)};
  if (k <= 0) return;
  std::vector<std::pair<float, int32_t>> c;
  c.reserve(size_t(n));
  for (int64_t i = 0; i < n; ++i) c.emplace_back(x[i], int32_t(i));
  k = int(std::min<int64_t>(k, n));
  std::partial_sort(c.begin(), c.begin() + k, c.end(), [](auto& a, auto& b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
  });
  for (int i = 0; i < k; ++i) top[i] = TopToken{c[size_t(i)].second, c[size_t(i)].first - lse};
}

}  // namespace lite_llama::ops

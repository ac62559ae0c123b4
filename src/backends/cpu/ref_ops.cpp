#include "backends/cpu/ref_ops.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "core/quant.h"

namespace lite_llama::cpu::ref {

void rms_norm(const float* x, const float* w, float eps, int64_t rows, int64_t n, float* out) {
  for (int64_t r = 0; r < rows; ++r) {
    double ss = 0;
    for (int64_t i = 0; i < n; ++i) ss += double(x[r * n + i]) * x[r * n + i];
    float inv = float(1.0 / std::sqrt(ss / double(n) + eps));
    for (int64_t i = 0; i < n; ++i) out[r * n + i] = x[r * n + i] * inv * w[i];
  }
}

void add_rms_norm(float* residual, const float* x, const float* w, float eps, int64_t rows,
                  int64_t n, float* out) {
  for (int64_t i = 0; i < rows * n; ++i) residual[i] += x[i];
  rms_norm(residual, w, eps, rows, n, out);
}

void linear(const float* x, int64_t T, int64_t K, const void* w, DType wtype, int64_t N,
            const float* bias, float* out, int64_t ldo) {
  std::vector<float> row(static_cast<size_t>(K));
  size_t rb = row_bytes(wtype, K);
  for (int64_t n = 0; n < N; ++n) {
    dequantize_row(wtype, static_cast<const uint8_t*>(w) + size_t(n) * rb, row.data(), K);
    for (int64_t t = 0; t < T; ++t) {
      double acc = bias ? bias[n] : 0.0;
      for (int64_t k = 0; k < K; ++k) acc += double(x[t * K + k]) * row[size_t(k)];
      out[t * ldo + n] = float(acc);
    }
  }
}

void rope(float* x, int64_t heads, int64_t head_dim, const float* cos_sin, int rot_dim,
          ops::RopeLayout layout) {
  int half = rot_dim / 2;
  const float* c = cos_sin;
  const float* s = cos_sin + half;
  for (int64_t h = 0; h < heads; ++h) {
    float* v = x + h * head_dim;
    for (int i = 0; i < half; ++i) {
      int a = layout == ops::RopeLayout::Interleaved ? 2 * i : i;
      int b = layout == ops::RopeLayout::Interleaved ? 2 * i + 1 : i + half;
      float x0 = v[a], x1 = v[b];
      v[a] = x0 * c[i] - x1 * s[i];
      v[b] = x0 * s[i] + x1 * c[i];
    }
  }
}

void swiglu(const float* gate_up, int64_t T, int64_t F, float* out) {
  for (int64_t t = 0; t < T; ++t)
    for (int64_t i = 0; i < F; ++i) {
      float g = gate_up[t * 2 * F + i], u = gate_up[t * 2 * F + F + i];
      out[t * F + i] = g / (1.0f + std::exp(-g)) * u;
    }
}

void attend(const float* q, const float* const* k_rows, const float* const* v_rows, int n,
            int head_dim, float scale, float* out) {
  std::vector<double> p(static_cast<size_t>(n));
  double mx = -INFINITY;
  for (int j = 0; j < n; ++j) {
    double s = 0;
    for (int d = 0; d < head_dim; ++d) s += double(q[d]) * k_rows[j][d];
    p[size_t(j)] = s * scale;
    mx = std::max(mx, p[size_t(j)]);
  }
  double sum = 0;
  for (int j = 0; j < n; ++j) sum += (p[size_t(j)] = std::exp(p[size_t(j)] - mx));
  for (int d = 0; d < head_dim; ++d) {
    double acc = 0;
    for (int j = 0; j < n; ++j) acc += p[size_t(j)] * v_rows[j][d];
    out[d] = float(acc / sum);
  }
}

void moe_route(const float* logits, int64_t T, int E, int top_k, bool norm_topk_prob,
               int32_t* expert, float* weight) {
  std::vector<double> p(static_cast<size_t>(E));
  std::vector<int> idx(static_cast<size_t>(E));
  for (int64_t t = 0; t < T; ++t) {
    const float* l = logits + t * E;
    const double mx = *std::max_element(l, l + E);
    double sum = 0;
    for (int e = 0; e < E; ++e) sum += (p[size_t(e)] = std::exp(double(l[e]) - mx));
    for (double& v : p) v /= sum;
    std::iota(idx.begin(), idx.end(), 0);
    std::stable_sort(idx.begin(), idx.end(), [&](int a, int b) { return p[size_t(a)] > p[size_t(b)]; });
    double kept = 0;
    for (int j = 0; j < top_k; ++j) kept += p[size_t(idx[size_t(j)])];
    for (int j = 0; j < top_k; ++j) {
      expert[t * top_k + j] = idx[size_t(j)];
      weight[t * top_k + j] = float(p[size_t(idx[size_t(j)])] / (norm_topk_prob ? kept : 1.0));
    }
  }
}

void moe_experts(const float* x, int64_t T, const ops::MoeExperts& w, const int32_t* expert,
                 const float* weight, int top_k, float* out) {
  const int64_t H = w.hidden, F = w.ffn;
  std::vector<float> gu(static_cast<size_t>(2 * F)), h(static_cast<size_t>(F)), y(static_cast<size_t>(H));
  std::vector<int> order(static_cast<size_t>(top_k));
  for (int64_t t = 0; t < T; ++t) {
    const int32_t* ex = expert + t * top_k;
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return ex[a] < ex[b]; });
    std::vector<double> acc(size_t(H), 0.0);
    for (int j : order) {
      const size_t e = size_t(ex[j]);
      linear(x + t * H, 1, H, w.gate[e].data, w.gate[e].dtype, F, nullptr, gu.data(), 2 * F);
      linear(x + t * H, 1, H, w.up[e].data, w.up[e].dtype, F, nullptr, gu.data() + F, 2 * F);
      swiglu(gu.data(), 1, F, h.data());
      linear(h.data(), 1, F, w.down[e].data, w.down[e].dtype, H, nullptr, y.data(), H);
      for (int64_t i = 0; i < H; ++i) acc[size_t(i)] += double(weight[t * top_k + j]) * y[size_t(i)];
    }
    for (int64_t i = 0; i < H; ++i) out[t * H + i] = float(acc[size_t(i)]);
  }
}

void rope_table(const float* inv_freq, int rot_dim, int64_t max_pos, float* out) {
  int half = rot_dim / 2;
  for (int64_t p = 0; p < max_pos; ++p)
    for (int i = 0; i < half; ++i) {
      // The angle is rounded to fp32 as HF computes it (position * inv_freq in fp32).
      double a = double(float(p) * inv_freq[i]);
      out[p * rot_dim + i] = float(std::cos(a));
      out[p * rot_dim + half + i] = float(std::sin(a));
    }
}

}  // namespace lite_llama::cpu::ref

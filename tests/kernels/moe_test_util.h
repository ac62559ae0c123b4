// Mixture-of-experts test helpers (tests/kernels/test_moe.cpp): experts as host values and views
// of them, dummy expert shapes, device experts in GQ layouts read back and dequantised, and how
// far quantised weights lie from the values they were quantised from.
#pragma once
#include "core/gq.h"
#include "kernels/cuda_test_util.h"

namespace lite_llama::kt {

struct Experts {
  std::vector<std::vector<float>> gate, up, down;  // per expert, values of the activation type
  ops::MoeExperts host;                            // views of them (F32)
};

// Experts with no data (bf16 shapes): backends draw dummy weights for them (ops.h).
inline ops::MoeExperts dummy_shape(int E, int64_t H, int64_t F) {
  ops::MoeExperts shape;
  shape.num_experts = E, shape.hidden = H, shape.ffn = F;
  for (int e = 0; e < E; ++e) {
    shape.gate.push_back(Tensor(nullptr, DType::BF16, {F, H}));
    shape.up.push_back(Tensor(nullptr, DType::BF16, {F, H}));
    shape.down.push_back(Tensor(nullptr, DType::BF16, {H, F}));
  }
  return shape;
}

// x.host: views of x's weight vectors as the CPU backend's host experts.
inline void wrap_host(Experts& x, int E, int64_t H, int64_t F) {
  x.host.num_experts = E, x.host.hidden = H, x.host.ffn = F;
  for (int e = 0; e < E; ++e) {
    x.host.gate.push_back(host_f32(x.gate[size_t(e)], {F, H}));
    x.host.up.push_back(host_f32(x.up[size_t(e)], {F, H}));
    x.host.down.push_back(host_f32(x.down[size_t(e)], {H, F}));
  }
}

inline Experts make_experts(std::mt19937& rng, DType act, int E, int64_t H, int64_t F) {
  Experts x;
  for (int e = 0; e < E; ++e) {
    x.gate.push_back(rand_act(rng, size_t(F * H), act, 1.0f / std::sqrt(float(H))));
    x.up.push_back(rand_act(rng, size_t(F * H), act, 1.0f / std::sqrt(float(H))));
    x.down.push_back(rand_act(rng, size_t(H * F), act, 1.0f / std::sqrt(float(F))));
  }
  wrap_host(x, E, H, F);
  return x;
}

inline const GqFormat kInt8Rows{GqKind::Int8, 0};  // --quantize int8: per channel

// Device experts in GQ layouts (each matrix its own), read back and dequantised by core/gq.h's
// reference: the weights the kernels compute with.
inline Experts dequantized(ops::Backend& be, const ops::MoeExperts& dev) {
  const int E = dev.num_experts;
  const int64_t H = dev.hidden, F = dev.ffn;
  Experts x;
  auto read = [&](const Tensor& t, int64_t rows, int64_t K) {
    const GqFormat f = gq_format(t.dtype).value();
    const size_t rb = f.row_bytes(K);
    std::vector<uint8_t> bytes(size_t(rows) * rb);
    be.copy_to_host(bytes.data(), t.data, bytes.size());
    std::vector<float> v(size_t(rows * K));
    for (int64_t r = 0; r < rows; ++r) dequantize_row_gq(f, bytes.data() + size_t(r) * rb, &v[size_t(r * K)], K);
    return v;
  };
  const std::vector<float> gu = read(dev.stacked_gate_up, E * 2 * F, H), d = read(dev.stacked_down, E * H, F);
  const size_t fh = size_t(F * H);
  for (int e = 0; e < E; ++e) {
    x.gate.emplace_back(gu.begin() + long(2 * e * fh), gu.begin() + long((2 * e + 1) * fh));
    x.up.emplace_back(gu.begin() + long((2 * e + 1) * fh), gu.begin() + long((2 * e + 2) * fh));
    x.down.emplace_back(d.begin() + long(e * fh), d.begin() + long((e + 1) * fh));
  }
  wrap_host(x, E, H, F);
  return x;
}

// The CPU backend's dummy experts' gate matrices (the unquantised bf16 draws of ops.h), per expert.
inline std::vector<std::vector<float>> cpu_dummy_gates(ops::Backend& cpu, const ops::MoeExperts& shape,
                                                       std::vector<Buffer>& keep) {
  const ops::MoeExperts c = cpu.prepare_experts(shape, 77, keep);
  std::vector<std::vector<float>> cg;
  for (int e = 0; e < shape.num_experts; ++e) cg.push_back(to_host(cpu, c.gate[size_t(e)]));
  return cg;
}

// Largest err(quantised, original, row absmax) over the experts' weights.
template <typename Err>
double max_weight_error(const std::vector<std::vector<float>>& want, const std::vector<std::vector<float>>& got,
                     int64_t K, Err err) {
  double worst = 0;
  for (size_t e = 0; e < want.size(); ++e)
    for (size_t r = 0; r < want[e].size() / size_t(K); ++r) {
      const float* w = &want[e][r * size_t(K)];
      const float* g = &got[e][r * size_t(K)];
      double amax = 0;
      for (int64_t c = 0; c < K; ++c) amax = std::max(amax, double(std::fabs(w[c])));
      for (int64_t c = 0; c < K; ++c) worst = std::max(worst, err(double(g[c]), double(w[c]), amax));
    }
  return worst;
}

// |quantised - original| in steps of the row's absmax / 127 (round to nearest: 0.5, a little
// more where the fp16 scale rounded down).
inline double max_int8_error(const std::vector<std::vector<float>>& want, const std::vector<std::vector<float>>& got,
                             int64_t K) {
  return max_weight_error(want, got, K,
                          [](double g, double w, double amax) { return std::fabs(g - w) * 127.0 / amax; });
}

// |quantised - original| in half e4m3 steps at the weight (max(|w|, the smallest normal 2^-6 s) /
// 16, s = the row's absmax / 448): round to nearest is 1.
inline double max_fp8_error(const std::vector<std::vector<float>>& want, const std::vector<std::vector<float>>& got,
                            int64_t K) {
  return max_weight_error(want, got, K, [](double g, double w, double amax) {
    return std::fabs(g - w) * 16 / std::max(std::fabs(w), amax / 448 / 64);
  });
}

// Largest |quantised - original| over the experts' weights, as a fraction of their row's max|w|.
inline double max_row_error(const std::vector<std::vector<float>>& want, const std::vector<std::vector<float>>& got,
                            int64_t K) {
  return max_weight_error(want, got, K, [](double g, double w, double amax) { return std::fabs(g - w) / amax; });
}

}  // namespace lite_llama::kt

#include "model/hf_quant.h"

#include <algorithm>
#include <thread>

#include "core/error.h"
#include "core/gq.h"
#include "core/half.h"
#include "core/log.h"
#include "core/quant.h"
#include "io/safetensors.h"

namespace lite_llama {
namespace {

constexpr int kAwqNibble[8] = {0, 4, 1, 5, 2, 6, 3, 7};  // nibble holding column 8j + c

const Tensor& need(const safetensors::Archive& a, const std::string& name, DType t, int64_t rows, int64_t cols) {
  const safetensors::TensorEntry* e = a.find(name);
  LL_CHECK(e != nullptr, "{}: missing tensor '{}'", a.path(), name);
  const Tensor& v = e->view;
  const bool ok = cols < 0 ? (v.ndim == 1 && v.shape[0] == rows) : (v.ndim == 2 && v.shape[0] == rows && v.shape[1] == cols);
  LL_CHECK(ok, "{}: tensor '{}' has shape {}, expected [{}{}]", a.path(), name, v.shape_str(), rows,
           cols < 0 ? "" : fmt::format(", {}", cols));
  LL_CHECK(v.dtype == t || (t == DType::F16 && (v.dtype == DType::BF16 || v.dtype == DType::F32)),
           "{}: tensor '{}' has type {}, expected {}", a.path(), name, dtype_name(v.dtype), dtype_name(t));
  return v;
}

std::vector<float> to_f32(const Tensor& t) {
  std::vector<float> f(static_cast<size_t>(t.numel()));
  dequantize_row(t.dtype, t.data, f.data(), t.numel());
  return f;
}

template <typename F>
void parallel_rows(int64_t n, F&& f) {
  const int nt = int(std::max(1u, std::min(8u, std::thread::hardware_concurrency())));
  std::vector<std::thread> pool;
  for (int i = 0; i < nt; ++i)
    pool.emplace_back([&, i] {
      for (int64_t r = i; r < n; r += nt) f(r);
    });
  for (auto& th : pool) th.join();
}

Tensor new_tensor(DType t, int64_t N, int64_t K, std::vector<Buffer>& keep) {
  Buffer b = host_buffer(row_bytes(t, K) * size_t(N));
  Tensor out(b.data(), t, {N, K});
  keep.push_back(std::move(b));
  return out;
}

// GPTQ and AWQ: codes(n, k), zero(g, n), scale(g, n) -> GQ4 rows, or BF16 rows where the group
// of k is given per k (act-order).
template <typename Code, typename Zero>
Tensor pack_int4(int64_t N, int64_t K, int64_t G, const std::vector<float>& scales, Code code, Zero zero,
                 const std::vector<int32_t>* g_idx, std::vector<Buffer>& keep) {
  const int64_t ng = K / G;
  if (g_idx) {
    Tensor out = new_tensor(DType::BF16, N, K, keep);
    parallel_rows(N, [&](int64_t n) {
      auto* o = static_cast<uint16_t*>(out.row(n));
      for (int64_t k = 0; k < K; ++k) {
        const int64_t g = (*g_idx)[size_t(k)];
        o[k] = f32_to_bf16(scales[size_t(g * N + n)] * (float(code(n, k)) - zero(g, n)));
      }
    });
    return out;
  }
  const GqFormat f{GqKind::Int4, G == K ? 0 : int(G)};
  Tensor out = new_tensor(gq_dtype(f), N, K, keep);
  parallel_rows(N, [&](int64_t n) {
    std::vector<int32_t> codes(static_cast<size_t>(K));
    std::vector<float> s(static_cast<size_t>(ng)), m(static_cast<size_t>(ng));
    for (int64_t k = 0; k < K; ++k) codes[size_t(k)] = code(n, k);
    for (int64_t g = 0; g < ng; ++g) s[size_t(g)] = scales[size_t(g * N + n)], m[size_t(g)] = -s[size_t(g)] * zero(g, n);
    pack_row_gq(f, codes.data(), s.data(), m.data(), out.row(n), K);
  });
  return out;
}

Tensor load_gptq(const safetensors::Archive& a, const QuantConfig& q, const std::string& p, std::vector<Buffer>& keep) {
  const safetensors::TensorEntry* qw = a.find(p + ".qweight");
  LL_CHECK(qw->view.ndim == 2, "{}: tensor '{}.qweight' must be 2-D", a.path(), p);
  const int64_t K = qw->view.shape[0] * 8, N = qw->view.shape[1], G = q.group_size ? q.group_size : K;
  LL_CHECK(K % G == 0 && N % 8 == 0, "{}: '{}.qweight' {} does not fit groups of {}", a.path(), p,
           qw->view.shape_str(), G);
  const Tensor& w = need(a, p + ".qweight", DType::I32, K / 8, N);
  const Tensor& z = need(a, p + ".qzeros", DType::I32, K / G, N / 8);
  const std::vector<float> s = to_f32(need(a, p + ".scales", DType::F16, K / G, N));
  const auto* wq = w.ptr<const uint32_t>();
  const auto* zq = z.ptr<const uint32_t>();
  std::vector<int32_t> g_idx;
  bool act_order = false;
  if (a.find(p + ".g_idx")) {
    const Tensor& gi = need(a, p + ".g_idx", DType::I32, K, -1);
    g_idx.assign(gi.ptr<const int32_t>(), gi.ptr<const int32_t>() + K);
    for (int64_t k = 0; k < K; ++k) {
      LL_CHECK(g_idx[size_t(k)] >= 0 && g_idx[size_t(k)] < K / G, "{}: '{}.g_idx'[{}] = {} is out of range", a.path(),
               p, k, g_idx[size_t(k)]);
      act_order |= g_idx[size_t(k)] != k / G;
    }
  }
  const float zoff = q.gptq_v1 ? 1.f : 0.f;
  auto code = [&](int64_t n, int64_t k) { return int32_t((wq[(k / 8) * N + n] >> (4 * (k % 8))) & 15); };
  auto zero = [&](int64_t g, int64_t n) { return float((zq[g * (N / 8) + n / 8] >> (4 * (n % 8))) & 15) + zoff; };
  if (act_order) {
    static bool warned = false;
    if (!warned) LL_WARN("{}: GPTQ act-order (desc_act) layers are dequantised to BF16 at load", a.path());
    warned = true;
  }
  return pack_int4(N, K, G, s, code, zero, act_order ? &g_idx : nullptr, keep);
}

Tensor load_awq(const safetensors::Archive& a, const QuantConfig& q, const std::string& p, std::vector<Buffer>& keep) {
  const safetensors::TensorEntry* qw = a.find(p + ".qweight");
  LL_CHECK(qw->view.ndim == 2, "{}: tensor '{}.qweight' must be 2-D", a.path(), p);
  const int64_t K = qw->view.shape[0], N = qw->view.shape[1] * 8, G = q.group_size ? q.group_size : K;
  LL_CHECK(K % G == 0, "{}: '{}.qweight' {} does not fit groups of {}", a.path(), p, qw->view.shape_str(), G);
  const Tensor& w = need(a, p + ".qweight", DType::I32, K, N / 8);
  const Tensor& z = need(a, p + ".qzeros", DType::I32, K / G, N / 8);
  const std::vector<float> s = to_f32(need(a, p + ".scales", DType::F16, K / G, N));
  const auto* wq = w.ptr<const uint32_t>();
  const auto* zq = z.ptr<const uint32_t>();
  auto code = [&](int64_t n, int64_t k) { return int32_t((wq[k * (N / 8) + n / 8] >> (4 * kAwqNibble[n % 8])) & 15); };
  auto zero = [&](int64_t g, int64_t n) { return float((zq[g * (N / 8) + n / 8] >> (4 * kAwqNibble[n % 8])) & 15); };
  return pack_int4(N, K, G, s, code, zero, nullptr, keep);
}

Tensor load_fp8(const safetensors::Archive& a, const QuantConfig& q, const std::string& p, std::vector<Buffer>& keep) {
  const safetensors::TensorEntry* we = a.find(p + ".weight");
  LL_CHECK(we->view.ndim == 2, "{}: tensor '{}.weight' must be 2-D", a.path(), p);
  const int64_t N = we->view.shape[0], K = we->view.shape[1];
  const Tensor& w = need(a, p + ".weight", DType::F8_E4M3, N, K);
  const int64_t B = q.fp8_block;
  std::vector<float> sc;
  int64_t sc_cols = 0;
  if (B) {
    LL_CHECK(K % B == 0, "{}: '{}.weight' has {} columns, not a multiple of the {} block", a.path(), p, K, B);
    sc_cols = K / B;
    sc = to_f32(need(a, p + ".weight_scale_inv", DType::F16, (N + B - 1) / B, sc_cols));
  } else {
    const safetensors::TensorEntry* e = a.find(p + ".weight_scale");
    LL_CHECK(e != nullptr, "{}: missing tensor '{}.weight_scale'", a.path(), p);
    const int64_t n = e->view.numel();
    LL_CHECK(n == 1 || n == N, "{}: '{}.weight_scale' has {} values, expected 1 or {}", a.path(), p, n, N);
    sc = to_f32(e->view);
    if (n == 1) sc.assign(static_cast<size_t>(N), sc[0]);
  }
  const GqFormat f{GqKind::Fp8, B ? int(B) : 0};
  LL_CHECK(gq_row_ok(f, K), "{}: '{}.weight' rows of {} do not fit the fp8 layout", a.path(), p, K);
  Tensor out = new_tensor(gq_dtype(f), N, K, keep);
  parallel_rows(N, [&](int64_t n) {
    const auto* src = static_cast<const uint8_t*>(w.row(n));
    std::vector<int32_t> codes(src, src + K);
    const int64_t ng = f.groups(K);
    std::vector<float> s(static_cast<size_t>(ng));
    for (int64_t g = 0; g < ng; ++g) s[size_t(g)] = B ? sc[size_t((n / B) * sc_cols + g)] : sc[size_t(n)];
    pack_row_gq(f, codes.data(), s.data(), nullptr, out.row(n), K);
  });
  return out;
}

}  // namespace

bool load_quantized_linear(const safetensors::Archive& a, const QuantConfig& q, const std::string& prefix,
                           std::vector<Buffer>& keep, Tensor& out) {
  if (q.method == "gptq" || q.method == "awq") {
    if (!a.find(prefix + ".qweight")) return false;
    out = q.method == "gptq" ? load_gptq(a, q, prefix, keep) : load_awq(a, q, prefix, keep);
    return true;
  }
  if (q.method == "fp8") {
    const safetensors::TensorEntry* e = a.find(prefix + ".weight");
    if (!e || e->view.dtype != DType::F8_E4M3) return false;
    out = load_fp8(a, q, prefix, keep);
    return true;
  }
  return false;
}

}  // namespace lite_llama

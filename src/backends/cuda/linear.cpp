#include "backends/cuda/linear.h"

#include <algorithm>

#include "backends/cuda/cuda_check.h"

namespace lite_llama::cuda {
namespace {

constexpr size_t kGemmWorkspace = 32u << 20;
constexpr size_t kDeqElems = 16u << 20;  // dequantised weight tile for GEMMs: 32 MiB, mostly in L2
// CudaTuning::gemv1_loop_blocks_per_sm = -1 loops the one-token GEMV from this peak memory
// bandwidth an SM (GB/s): an H200 has 37, an H100 SXM 25 (measured faster and slower).
constexpr double kGemv1LoopMinGbsPerSm = 32.0;

GqArgs gq_args(const Tensor& w, bool pdl, int num_sms) {
  const GqFormat f = *gq_format(w.dtype);
  return GqArgs{int(f.kind), f.group, w.row_nbytes(), pdl, num_sms};
}

}  // namespace

CudaLinear::CudaLinear(CudaDevice& dev, const CudaTuning& tuning, bool tensor_parallel)
    : dev_(dev),
      tuning_(tuning),
      pdl_(tuning.pdl && dev.props().major >= 9),
      tensor_parallel_(tensor_parallel),
      gemm_(kGemmWorkspace) {}

void CudaLinear::run(const Tensor& x, const ops::Linear& w, Tensor out) {
  const int T = int(x.rows()), K = int(x.cols()), N = int(w.out_features);
  if (T == 0) return;
  const bool f32 = out.dtype == DType::F32;
  const void* bias = w.bias.data;
  const Act act = dev_.act();
  cudaStream_t s = dev_.stream();
  struct Forget {  // the output overwrites what the recorded int8 form described
    const void*& of;
    const void* out;
    ~Forget() { if (of == out) of = nullptr; }
  } forget{xq_of_, out.data};
  const int ldo = int(out.cols());  // wider than N: padded logits rows (Decoder::logit_cols)
  if (ldo != N) {
    LL_CHECK(ldo > N && !bias && !is_gq(w.parts[0].dtype), "linear: {} outputs into rows of {} columns", N, ldo);
    if (takes_gemv(T, K)) {
      LL_CUDA(gemv(act, x.data, w.parts[0].data, nullptr, out.data, f32, T, N, K, ldo, s, pdl_ && tuning_.pdl_gemv,
                   gemv1_options()));
      return;
    }
    // cuBLASLt's vectorised kernels need the output's contiguous extent (N) aligned as well as its
    // stride: the first N rounded down to 8 outputs, then the last few apart.
    const int n8 = N / 8 * 8;
    const size_t es = f32 ? 4 : 2;
    if (n8 > 0) gemm_.run(act, x.data, w.parts[0].data, nullptr, out.data, f32, T, n8, K, s, ldo);
    if (n8 < N)
      gemm_.run(act, x.data, w.parts[0].ptr<uint8_t>() + size_t(n8) * w.parts[0].row_nbytes(), nullptr,
                out.ptr<uint8_t>() + size_t(n8) * es, f32, T, N - n8, K, s, ldo);
    return;
  }
  if (is_gq(w.parts[0].dtype)) return run_gq(x, w, out, T, N, K, f32);
  // For a few tokens the CUDA-core GEMV streams weights at bandwidth; with more its fp32 math
  // is the limit (8 FLOP per weight byte at 8 tokens), so tensor cores (cuBLASLt) win.
  if (takes_gemv(T, K)) {
    LL_CUDA(gemv(act, x.data, w.parts[0].data, bias, out.data, f32, T, N, K, N, s, pdl_ && tuning_.pdl_gemv,
                 gemv1_options()));
  } else if (f32 && bias) {
    // cuBLASLt wants the bias in the output type; ours is 16-bit, so add it separately.
    gemm_.run(act, x.data, w.parts[0].data, nullptr, out.data, true, T, N, K, s);
    LL_CUDA(add_bias_f32(act, static_cast<float*>(out.data), bias, T, N, s));
  } else {
    gemm_.run(act, x.data, w.parts[0].data, bias, out.data, f32, T, N, K, s);
  }
}

std::pair<int, int> CudaLinear::tune(const std::vector<const ops::Linear*>& same, DType out_dtype,
                                     const std::vector<int>& token_counts) {
  std::pair<int, int> n{0, 0};
  if (!tuning_.gemm_tune || same.empty() || is_gq(same[0]->parts[0].dtype)) return n;
  const ops::Linear& w0 = *same[0];
  const int N = int(w0.out_features), K = int(w0.in_features);
  const bool f32 = out_dtype == DType::F32;
  const void* bias = f32 ? nullptr : w0.bias.data;  // as run(): an fp32 output adds its bias apart
  std::vector<const void*> weights;
  for (const ops::Linear* w : same) weights.push_back(w->parts[0].data);
  for (int T : token_counts) {
    if (T < 1 || takes_gemv(T, K)) continue;
    const GemmTuneResult r = gemm_.tune(dev_.act(), f32, bias, T, N, K, weights, dev_.stream());
    if (r.candidates > 0) ++n.first, n.second += r.chosen != 0;
  }
  return n;
}

bool CudaLinear::high_bandwidth_per_sm() const {
  return !tensor_parallel_ && dev_.peak_bandwidth_gbs() >= kGemv1LoopMinGbsPerSm * dev_.sm_count();
}

int CudaLinear::gemv_max_tokens() const {
  const int n = tuning_.gemv_max_tokens;
  return n >= 0 ? std::min(n, 8) : high_bandwidth_per_sm() ? 2 : 1;
}

Gemv1Options CudaLinear::gemv1_options() const {
  int per_sm = tuning_.gemv1_loop_blocks_per_sm;
  if (per_sm < 0) per_sm = high_bandwidth_per_sm() ? 4 : 0;
  return {per_sm * dev_.sm_count(), tuning_.gemv1_loop_balanced, on_here(tuning_.gemv1_ordered_prefetch),
          dev_.sm_count()};
}

bool CudaLinear::fused_gemv16(const ops::Linear& w, int64_t rows) const {
  return rows >= 1 && rows <= std::min(gemv_max_tokens(), kGemv1MaxTokens) && w.parts.size() == 1 &&
         !is_gq(w.parts[0].dtype);
}

bool CudaLinear::swiglu_fits(const Tensor& gate_up, const ops::Linear& w) const {
  const int64_t K = gate_up.cols() / 2;
  return fused_gemv16(w, gate_up.rows()) && w.in_features == K && K <= tuning_.swiglu_gemv_max_k &&
         gemv_swiglu_fits(int(K));
}

void CudaLinear::run_swiglu(const Tensor& gate_up, const ops::Linear& w, Tensor out) {
  xq_of_ = nullptr;  // no int8 form of the SwiGLU output exists for this step
  LL_CUDA(gemv_swiglu(dev_.act(), gate_up.data, w.parts[0].data, w.bias.data, out.data, out.dtype == DType::F32,
                      int(gate_up.rows()), int(w.out_features), int(gate_up.cols() / 2), dev_.stream(), pdl_ && tuning_.pdl_gemv,
                      gemv1_options()));
}

bool CudaLinear::gate_up_swiglu_fits(const Tensor& x, const ops::Linear& w, const Tensor& out) const {
  return tuning_.gate_up_swiglu && fused_gemv16(w, x.rows()) && out.rows() == x.rows() && out.dtype != DType::F32 &&
         w.in_features == x.cols() && w.out_features == 2 * out.cols() &&
         gemv_gate_up_swiglu_fits(int(out.cols()), int(x.cols()));
}

void CudaLinear::run_gate_up_swiglu(const Tensor& x, const ops::Linear& w, Tensor out) {
  xq_of_ = nullptr;  // no integer form of the SwiGLU output is written
  LL_CUDA(gemv_gate_up_swiglu(dev_.act(), x.data, w.parts[0].data, w.bias.data, out.data, int(x.rows()), int(out.cols()),
                              int(x.cols()), dev_.stream(), pdl_ && tuning_.pdl_gemv, gemv1_options()));
}

bool CudaLinear::rope_store_fits(const Tensor& x, const ops::Linear& w, const RopeKvArgs& a) const {
  return on_here(tuning_.qkv_rope_gemv) && x.rows() == 1 && fused_gemv16(w, x.rows()) && w.in_features == x.cols() &&
         w.out_features == int64_t(a.Hq + 2 * a.Hkv) * a.D && gemv_rope_store_fits(a, int(x.cols()));
}

void CudaLinear::run_rope_store(const Tensor& x, const ops::Linear& w, const RopeKvArgs& a) {
  xq_of_ = nullptr;
  LL_CUDA(gemv_rope_store(dev_.act(), x.data, w.parts[0].data, w.bias.data, a, int(x.cols()), dev_.stream(),
                          pdl_ && tuning_.pdl_gemv, gemv1_options()));
}

// Quantised weights: a GEMV that dequantises in registers for decode batches, a tensor-core
// GEMM that does the same up to kGqMmaMaxTokens; above that (long prefills), tiles of rows
// dequantised into an L2-sized scratch, each one cuBLASLt GEMM into its columns.
void CudaLinear::run_gq(const Tensor& x, const ops::Linear& w, Tensor out, int T, int N, int K, bool f32) {
  const Tensor& wt = w.parts[0];
  const GqArgs q = gq_args(wt, pdl_, dev_.sm_count());
  const Act act = dev_.act();
  cudaStream_t s = dev_.stream();
  // int8 / int4 decode steps: the integer GEMV (int16 or int8 activation codes) up to dp4a_max()
  // tokens unless gq_fp32, else the 16-bit one (gemv_gq16). fp8 has neither: its fp32 GEMV is math-bound from 3
  // tokens, where tiles win.
  const bool fp8 = q.kind == int(GqKind::Fp8);
  if (fp8 ? T <= 2 : T <= kGqGemvMaxTokens) {
    const bool dp4a = !fp8 && !tuning_.gq_fp32 && T <= dp4a_max(q.kind);
    const bool ready = dp4a && xq_of_ == x.data && xq_rows_ == T && xq_cols_ == K;
    LL_CUDA(gemv_gq(act, q, x.data, wt.data, w.bias.data, out.data, f32, T, N, K, N,
                    dp4a ? x_form() : GqX{nullptr}, ready, s));
    return;
  }
  const int fp8_min = tuning_.fp8_gemm_min_tokens >= 0 ? tuning_.fp8_gemm_min_tokens : kFp8GemmMinTokens;
  if (T >= fp8_min && q.kind == int(GqKind::Fp8) && run_fp8(x, w, out, T, N, K, f32)) return;
  const int mma_max = tuning_.gq_mma_max_tokens >= 0 ? tuning_.gq_mma_max_tokens
                      : q.kind == int(GqKind::Int8)   ? kGqMmaMaxTokensInt8
                                                      : kGqMmaMaxTokens;
  if (T <= mma_max) {
    LL_CUDA(gemm_gq_mma(act, q, x.data, wt.data, w.bias.data, out.data, f32, T, N, K, N, deq_.data(),
                        kDeqElems * 2, s));
    return;
  }
  const int tile = std::max(16, int(kDeqElems / size_t(K)) / 16 * 16);
  const size_t es = f32 ? 4 : 2;
  for (int n0 = 0; n0 < N; n0 += tile) {
    const int nc = std::min(tile, N - n0);
    LL_CUDA(dequant_gq(act, q, wt.data, nullptr, n0, nc, K, deq_.data(), s));
    const void* bias = w.bias.data && !f32 ? static_cast<const uint8_t*>(w.bias.data) + size_t(n0) * 2 : nullptr;
    gemm_.run(act, x.data, deq_.data(), bias, static_cast<uint8_t*>(out.data) + size_t(n0) * es, f32, T, nc, K, s, N);
  }
  if (f32 && w.bias.data) LL_CUDA(add_bias_f32(act, static_cast<float*>(out.data), w.bias.data, T, N, s));
}

// FP8 W8A8: activations quantised per token into deq_ (codes, then scales), cuBLASLt FP8 GEMM
// with per-row weight and per-token activation scales, chunks of tokens that fit deq_. False
// where the weight has no fp8 row scales or cuBLASLt no algorithm (nothing written then).
bool CudaLinear::run_fp8(const Tensor& x, const ops::Linear& w, Tensor out, int T, int N, int K, bool f32) {
  const Tensor& wt = w.parts[0];
  if (!fp8_row_scales(*gq_format(wt.dtype), K)) return false;
  const Act act = dev_.act();
  cudaStream_t s = dev_.stream();
  const auto* w_scales = reinterpret_cast<const float*>(wt.ptr<uint8_t>() + size_t(N) * wt.row_nbytes());
  const size_t per_token = size_t(K) + sizeof(float);
  const int chunk = int(std::min<size_t>(size_t(T), kDeqElems * 2 / per_token));
  auto* codes = deq_.as<uint8_t>();
  auto* scales = reinterpret_cast<float*>(codes + size_t(chunk) * size_t(K));  // K % 16 == 0
  const void* bias = f32 ? nullptr : w.bias.data;
  const size_t es = f32 ? 4 : 2;
  for (int t0 = 0; t0 < T; t0 += chunk) {
    const int tc = std::min(chunk, T - t0);
    LL_CUDA(quantize_rows_fp8(act, x.ptr<uint8_t>() + size_t(t0) * size_t(K) * 2, tc, K, codes, scales, s));
    if (!gemm_.run_fp8(act, codes, scales, wt.data, int(wt.row_nbytes()), w_scales, bias,
                       out.ptr<uint8_t>() + size_t(t0) * size_t(N) * es, f32, tc, N, K, s)) {
      LL_CHECK(t0 == 0, "cuBLASLt FP8 GEMM: no algorithm for {} of {} tokens", tc, T);
      return false;
    }
  }
  if (f32 && w.bias.data) LL_CUDA(add_bias_f32(act, out.ptr<float>(), w.bias.data, T, N, s));
  return true;
}

void CudaLinear::add_gq_weight(GqFormat f) {
  if (!deq_.data()) deq_ = dev_.alloc(kDeqElems * 2);
  if (!gq_scratch_.data()) gq_scratch_ = dev_.alloc(kGqScratchBytes);
  int_weights_ |= f.kind != GqKind::Fp8;
  int4_weights_ += f.kind == GqKind::Int4;
  int8_weights_ += f.kind == GqKind::Int8;
}

bool CudaLinear::fp8_row_scales(GqFormat f, int64_t K) const {
  return tuning_.fp8_gemm && dev_.compute_capability() >= 89 && f.kind == GqKind::Fp8 && f.group == 0 &&
         K % 16 == 0;
}

GqX CudaLinear::quantize_x_for(const Tensor& out, bool shape_ok) {
  xq_of_ = nullptr;
  if (!gq_scratch_.data() || tuning_.gq_fp32 || !int_weights_ || !shape_ok || out.rows() > dp4a_max())
    return GqX{nullptr};
  xq_of_ = out.data;
  xq_rows_ = int(out.rows()), xq_cols_ = int(out.cols());
  return x_form();
}

GqX CudaLinear::x_form() const {
  // int16 codes in the int4 weights' order where those are most of the quantised matrices (a
  // GGUF Q4 file keeps a few Q8 ones, which then reorder their activations in registers).
  return GqX{gq_scratch_.data(), !tuning_.gq_int8_act, int4_weights_ >= int8_weights_};
}

}  // namespace lite_llama::cuda

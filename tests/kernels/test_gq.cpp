// Quantised (GQ) weights on CUDA against the CPU: the GEMV (T <= 8), the tensor-core GEMM (to 256
// tokens) and the dequantise + cuBLASLt path of every layout, the embedding gather, the on-device
// quantiser behind --quantize int8 / int4 / fp8, and GGUF K-quant parts fused into one linear.
// The reference is the CPU backend computing with F32 weights = dequantize_row of the very bytes
// the GPU holds (the engine's reference dequantiser), so only the GPU's arithmetic is under test;
// the GPU rounds each dequantised weight to fp16 (2^-11 relative), well inside the 16-bit output
// bound.
#include "common/random_blocks.h"
#include "core/gq.h"

#include <cuda_runtime.h>

#include <cstdlib>
#include "kernels/cuda_test_util.h"

using namespace lite_llama;
using namespace lite_llama::kt;

namespace {

// Host rows of `t` quantised from random values with sd 1/sqrt(K).
std::vector<uint8_t> random_rows(std::mt19937& rng, DType t, int64_t rows, int64_t K) {
  std::vector<float> v = randn(rng, size_t(rows * K), 1.0f / std::sqrt(float(K)));
  const size_t rb = row_bytes(t, K);
  std::vector<uint8_t> b(rb * size_t(rows));
  for (int64_t r = 0; r < rows; ++r) quantize_row(t, v.data() + r * K, b.data() + size_t(r) * rb, K);
  return b;
}

std::vector<float> dequant_all(DType t, const uint8_t* bytes, int64_t rows, int64_t K) {
  std::vector<float> f(size_t(rows * K));
  const size_t rb = row_bytes(t, K);
  for (int64_t r = 0; r < rows; ++r) dequantize_row(t, bytes + size_t(r) * rb, f.data() + r * K, K);
  return f;
}

constexpr int64_t kFp8GemmMinTokens = 32;  // the CUDA backend's default (backends/cuda/launchers.h)

// Whether the backend runs per-channel fp8 weights at T tokens as FP8 W8A8 (cuBLASLt, sm_89+).
bool fp8_gemm(DType w, int64_t T) {
  int dev = 0, major = 0, minor = 0;
  cudaGetDevice(&dev);
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
  cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev);
  return w == DType::GF8 && T >= kFp8GemmMinTokens && major * 10 + minor >= 89;
}

// Decode GEMVs of int8 / int4 weights quantise the activations per block of 32. With int16 codes
// (the default: scale amax / 32767) each x moves by <= amax / 65534, far inside the 16-bit
// bound. With int8 codes (CudaTuning::gq_int8_act, scale amax / 127) each x moves by <= half a
// step, ~0.5% of the block's scale (sd ~0.15% of amax for uniform rounding), so outputs of
// random-sign products move by ~0.5% relative (rel-L2); the bound leaves 3x room. A wrong code,
// scale, offset or permutation gives errors of order 1.
// FP8 W8A8 rounds each activation to e4m3 (3 mantissa bits: <= 6.25% relative, ~2.5% rms), so
// outputs move by ~2.5% (rel-L2); its exact arithmetic is checked separately (Fp8W8A8...).
// int8_act: the decode GEMV at T <= 8 runs on int8 activation codes.
Tol int_path_tol(DType act, int64_t T, DType w, bool int8_act) {
  if (fp8_gemm(w, T)) return Tol{5e-2, 1.5e-1};
  const bool coarse = T <= 8 && gq_format(w)->kind != GqKind::Fp8 && int8_act;
  return coarse ? Tol{1.5e-2, 6e-2} : act_tol(act);
}

// out = x @ W^T on both backends; W given to the GPU as `gpu_lin`, to the CPU as F32 `ref`.
void check_linear(ops::Backend& gpu, ops::Backend& cpu, const ops::Linear& gpu_lin, std::vector<float>& ref,
                  std::vector<float>* bias, std::mt19937& rng, DType act, std::vector<Buffer>& keep,
                  bool int8_act = false) {
  const int64_t K = gpu_lin.in_features, N = gpu_lin.out_features;
  ops::Linear cl;
  cl.in_features = K, cl.out_features = N;
  cl.parts = {Tensor(ref.data(), DType::F32, {N, K})};
  if (bias) cl.bias = Tensor(bias->data(), DType::F32, {N});
  for (int64_t T : {1, 2, 3, 8, 9, 17, 33, 64, 130, 300}) {
    SCOPED_TRACE(::testing::Message() << "K " << K << " N " << N << " T " << T);
    std::vector<float> x = rand_act(rng, size_t(T * K), act);
    std::vector<float> want(size_t(T * N), NAN);
    cpu.linear(host_f32(x, {T, K}), cl, host_f32(want, {T, N}));
    DevTensor dx = dev_from(gpu, x, act, {T, K});
    DevTensor out = dev_alloc(gpu, act, {T, N});
    poison(gpu, out.t);
    gpu.linear(dx.t, gpu_lin, out.t);
    const Tol tol = int_path_tol(act, T, gpu_lin.parts[0].dtype, int8_act);
    EXPECT_TRUE(close_rows(to_host(gpu, out.t), want, size_t(N), tol, "token"));
    DevTensor o32 = dev_alloc(gpu, DType::F32, {T, N});
    poison(gpu, o32.t);
    gpu.linear(dx.t, gpu_lin, o32.t);
    EXPECT_TRUE(close_rows(to_host(gpu, o32.t), want, size_t(N), tol, "token")) << "F32 output";
  }
}

class CudaGq : public CudaVsCpu {};
void run_prequantised(ops::Backend& gpu, ops::Backend& cpu, DType act, std::vector<Buffer>& keep, bool int8_act);
void run_norm_swiglu_chain(ops::Backend& qgpu, ops::Backend& cpu, DType act, std::vector<Buffer>& keep,
                           bool int8_act);

}  // namespace

TEST_P(CudaGq, PrequantisedLayoutsGemvAndGemm) {
  // Row blocks already in a GQ layout (as the GPTQ / AWQ loaders produce) are uploaded as they are.
  // Every decode path: the integer GEMV on int16 codes (the default) and on int8 codes
  // (gq_int8_act), the 16-bit GEMV (CudaTuning::gq_fp32; fp8: the fp32 GEMV) and the 16-bit GEMV
  // for every step of up to 8 tokens (gq_dp4a_max_tokens = 0).
  const char* names[] = {"integer GEMV path, int16 codes", "16-bit GEMV path", "16-bit decode path",
                         "integer GEMV path, int8 codes"};
  for (int path : {0, 1, 2, 3}) {
    SCOPED_TRACE(names[path]);
    CudaTuning t;
    t.gq_fp32 = path == 1;
    t.gq_dp4a_max_tokens = path == 2 ? 0 : 8;
    t.gq_int8_act = path == 3;
    gpu = make_gpu(GetParam(), t);
    run_prequantised(*gpu, *cpu, act, keep, path == 3);
  }
}

namespace {
void run_prequantised(ops::Backend& gpu_be, ops::Backend& cpu_be, DType act, std::vector<Buffer>& keep,
                      bool int8_act) {
  ops::Backend* gpu = &gpu_be;
  ops::Backend* cpu = &cpu_be;
  std::mt19937 rng(301);
  const DType types[] = {DType::GQ8, DType::GQ8_G16, DType::GQ8_G32, DType::GQ4_G32,
                         DType::GQ4_G64, DType::GQ4_G128, DType::GQ4, DType::GF8, DType::GF8_G128};
  int idx = 0;
  for (DType t : types)
    for (int64_t K : {576, 2048, 4864}) {
      if (!gq_row_ok(*gq_format(t), K)) continue;
      const int64_t N = idx % 2 ? 1000 : 264;
      const bool with_bias = idx++ % 3 == 0;
      SCOPED_TRACE(::testing::Message() << dtype_name(t) << " bias " << with_bias);
      const int64_t n1 = N / 2, n2 = N - n1;
      std::vector<uint8_t> a = random_rows(rng, t, n1, K), b = random_rows(rng, t, n2, K);
      ops::Linear host;
      host.in_features = K, host.out_features = N;
      host.parts = {Tensor(a.data(), t, {n1, K}), Tensor(b.data(), t, {n2, K})};
      std::vector<float> bias = rand_act(rng, size_t(N), act, 0.5f);
      if (with_bias) {
        host.bias = upload_f32(*gpu, bias, {N}, keep);
        settle(*gpu);
      }
      const ops::Linear gl = gpu->prepare_linear(host, keep);
      settle(*gpu);
      ASSERT_EQ(gl.parts[0].dtype, t);
      std::vector<float> ref = dequant_all(t, a.data(), n1, K), rb = dequant_all(t, b.data(), n2, K);
      ref.insert(ref.end(), rb.begin(), rb.end());
      check_linear(*gpu, *cpu, gl, ref, with_bias ? &bias : nullptr, rng, act, keep, int8_act);
      keep.clear();
    }
}
}  // namespace

TEST_P(CudaGq, Gemv16BitActivations) {
  // The 16-bit-activation decode GEMV (gemv_gq16: codes dequantised into tensor-core fragments)
  // at 1-4 and 8 tokens, through both ways of selecting it (gq_fp32; no dp4a steps at all), on
  // matrices whose rows are not a multiple of its 16-row groups, with and without bias, 16-bit
  // and fp32 outputs. Bound: the 16-bit path's (one rounding of each weight and output).
  std::mt19937 rng(307);
  struct Shape {
    int64_t K, N;
  } shapes[] = {{2048, 1000}, {8192, 1000}, {2048, 5632}, {8192, 1544}};
  for (int sel : {0, 1}) {
    CudaTuning t;
    t.gq_fp32 = sel == 0;
    if (sel == 1) t.gq_dp4a_max_tokens = 0;
    auto g = make_gpu(GetParam(), t);
    int idx = 0;
    for (DType wt : {DType::GQ4_G32, DType::GQ4_G128, DType::GQ4, DType::GQ8, DType::GQ8_G16})
      for (const Shape& sh : shapes) {
        if (idx++ % 2 != sel) continue;  // each (type, shape) once, alternating the selector
        const bool with_bias = idx % 3 != 0;
        const int64_t K = sh.K, N = sh.N;
        SCOPED_TRACE(::testing::Message() << dtype_name(wt) << " K " << K << " N " << N << " bias " << with_bias
                                          << (sel ? " dp4a off" : " gq_fp32"));
        std::vector<uint8_t> rows = random_rows(rng, wt, N, K);
        ops::Linear host;
        host.in_features = K, host.out_features = N;
        host.parts = {Tensor(rows.data(), wt, {N, K})};
        std::vector<float> bias = rand_act(rng, size_t(N), act, 0.5f);
        if (with_bias) {
          host.bias = upload_f32(*g, bias, {N}, keep);
          settle(*g);
        }
        const ops::Linear gl = g->prepare_linear(host, keep);
        settle(*g);
        ASSERT_EQ(gl.parts[0].dtype, wt);
        std::vector<float> ref = dequant_all(wt, rows.data(), N, K);
        ops::Linear cl;
        cl.in_features = K, cl.out_features = N;
        cl.parts = {Tensor(ref.data(), DType::F32, {N, K})};
        if (with_bias) cl.bias = Tensor(bias.data(), DType::F32, {N});
        for (int64_t T : {1, 2, 3, 4, 8}) {
          SCOPED_TRACE(::testing::Message() << "T " << T);
          std::vector<float> x = rand_act(rng, size_t(T * K), act);
          std::vector<float> want(size_t(T * N), NAN);
          cpu->linear(host_f32(x, {T, K}), cl, host_f32(want, {T, N}));
          DevTensor dx = dev_from(*g, x, act, {T, K});
          DevTensor out = dev_alloc(*g, act, {T, N});
          poison(*g, out.t);
          g->linear(dx.t, gl, out.t);
          EXPECT_TRUE(close_rows(to_host(*g, out.t), want, size_t(N), act_tol(act), "token"));
          DevTensor o32 = dev_alloc(*g, DType::F32, {T, N});
          poison(*g, o32.t);
          g->linear(dx.t, gl, o32.t);
          EXPECT_TRUE(close_rows(to_host(*g, o32.t), want, size_t(N), act_tol(act), "token")) << "F32 output";
        }
        keep.clear();
      }
  }
}

TEST_P(CudaGq, IntegerGemvInt16CodesMatchFp32Reference) {
  // The default integer decode GEMV (int16 activation codes, dp2a) with fp32 outputs must agree
  // with the CPU's fp32 product within the fp32 bound (each x moves by <= amax / 65534: rel-L2
  // ~2e-5), and be at least 20x closer than the int8-code GEMV (rel-L2 ~5e-3) on the same inputs.
  // A swapped pair, a wrong byte order or a missing offset gives errors of order 1.
  std::mt19937 rng(309);
  CudaTuning t16, t8;
  t16.gq_dp4a_max_tokens = t8.gq_dp4a_max_tokens = 8;
  t8.gq_int8_act = true;
  auto g16 = make_gpu(GetParam(), t16), g8 = make_gpu(GetParam(), t8);
  struct Shape {
    int64_t K, N;
  } shapes[] = {{2048, 1000}, {8192, 264}, {576, 1544}};
  for (DType wt : {DType::GQ4_G32, DType::GQ4_G128, DType::GQ4, DType::GQ8, DType::GQ8_G16, DType::GQ8_G32})
    for (const Shape& sh : shapes) {
      const int64_t K = sh.K, N = sh.N;
      if (!gq_row_ok(*gq_format(wt), K)) continue;
      SCOPED_TRACE(::testing::Message() << dtype_name(wt) << " K " << K << " N " << N);
      std::vector<uint8_t> rows = random_rows(rng, wt, N, K);
      ops::Linear host;
      host.in_features = K, host.out_features = N;
      host.parts = {Tensor(rows.data(), wt, {N, K})};
      const ops::Linear l16 = g16->prepare_linear(host, keep), l8 = g8->prepare_linear(host, keep);
      settle(*g16), settle(*g8);
      std::vector<float> ref = dequant_all(wt, rows.data(), N, K);
      ops::Linear cl;
      cl.in_features = K, cl.out_features = N;
      cl.parts = {Tensor(ref.data(), DType::F32, {N, K})};
      for (int64_t T : {1, 2, 3, 4, 8}) {
        SCOPED_TRACE(::testing::Message() << "T " << T);
        std::vector<float> x = rand_act(rng, size_t(T * K), act);
        std::vector<float> want(size_t(T * N), NAN);
        cpu->linear(host_f32(x, {T, K}), cl, host_f32(want, {T, N}));
        DevTensor dx16 = dev_from(*g16, x, act, {T, K}), dx8 = dev_from(*g8, x, act, {T, K});
        DevTensor o16 = dev_alloc(*g16, DType::F32, {T, N}), o8 = dev_alloc(*g8, DType::F32, {T, N});
        poison(*g16, o16.t), poison(*g8, o8.t);
        g16->linear(dx16.t, l16, o16.t);
        g8->linear(dx8.t, l8, o8.t);
        const std::vector<float> got16 = to_host(*g16, o16.t), got8 = to_host(*g8, o8.t);
        EXPECT_TRUE(close_rows(got16, want, size_t(N), f32_tol(), "token"));
        const double e16 = err_stats(got16.data(), want.data(), want.size()).rel_l2;
        const double e8 = err_stats(got8.data(), want.data(), want.size()).rel_l2;
        EXPECT_LT(e16 * 20, e8) << "int16 codes rel-L2 " << e16 << ", int8 codes " << e8;
      }
      keep.clear();
    }
}

TEST_P(CudaGq, EmbeddingRowsDequantised) {
  std::mt19937 rng(302);
  for (DType t : {DType::GQ8, DType::GQ4_G128, DType::GQ4_G32, DType::GF8, DType::GQ8_G16}) {
    const int64_t V = 3000, H = 1024;
    std::vector<uint8_t> table = random_rows(rng, t, V, H);
    const Tensor dt = gpu->prepare_weight(Tensor(table.data(), t, {V, H}), keep);
    settle(*gpu);
    ASSERT_EQ(dt.dtype, t);
    std::vector<int32_t> ids = {0, 2999, 17, 17, 1500, 42, 2048};
    DevInts dids = dev_ints(*gpu, ids);
    DevTensor out = dev_alloc(*gpu, act, {int64_t(ids.size()), H});
    poison(*gpu, out.t);
    gpu->embedding(dt, dids.ptr(), int(ids.size()), out.t);
    std::vector<float> want;
    for (int32_t id : ids) {
      std::vector<float> row(static_cast<size_t>(H));
      dequantize_row(t, table.data() + size_t(id) * row_bytes(t, H), row.data(), H);
      want.insert(want.end(), row.begin(), row.end());
    }
    EXPECT_TRUE(close_rows(to_host(*gpu, out.t), want, size_t(H), act_tol(act))) << dtype_name(t);
    keep.clear();
  }
}

TEST_P(CudaGq, QuantiseOnDevice) {
  // --quantize: 16-bit weights quantised by the GPU. The stored codes, dequantised on the host,
  // must be within each scheme's rounding of the original weights, and the linear must agree
  // with the CPU on those dequantised values.
  std::mt19937 rng(303);
  struct Mode {
    const char* name;
    DType want;
    double step;  // max |error| / max|w| of the row (half a quantisation step, with margin)
  } modes[] = {{"int8", DType::GQ8, 0.5 / 127 * 1.05}, {"int4", DType::GQ4_G128, 0.3},
               {"fp8", DType::GF8, 1.0 / 16 * 1.05}};
  for (const Mode& m : modes) {
    SCOPED_TRACE(m.name);
    auto qgpu = make_gpu_quantized(GetParam(), m.name);
    const int64_t K = 2048, N = 1000;
    std::vector<float> w = randn(rng, size_t(N * K), 0.02f);
    for (float& v : w) v = round_to(act, round_to(DType::BF16, v));
    ops::Linear host;
    host.in_features = K, host.out_features = N;
    host.parts = {Tensor(w.data(), DType::F32, {600, K}), Tensor(w.data() + 600 * K, DType::F32, {400, K})};
    const ops::Linear gl = qgpu->prepare_linear(host, keep);
    qgpu->synchronize();
    ASSERT_EQ(gl.parts[0].dtype, m.want);
    const std::vector<uint8_t> bytes = to_host_bytes(*qgpu, gl.parts[0]);
    std::vector<float> deq = dequant_all(m.want, bytes.data(), N, K);
    if (m.want == DType::GQ4_G128) {
      // The int4 quantiser searches clipped ranges per group: outliers may move by more than half
      // a min/max step, but the total squared error must not exceed plain min/max rounding's
      // (the host reference quantiser), and nothing moves by more than 30% of the row's max.
      std::vector<uint8_t> ref_rows(row_bytes(m.want, K) * size_t(N));
      for (int64_t r = 0; r < N; ++r)
        quantize_row(m.want, w.data() + r * K, ref_rows.data() + size_t(r) * row_bytes(m.want, K), K);
      const std::vector<float> ref_deq = dequant_all(m.want, ref_rows.data(), N, K);
      double e_gpu = 0, e_ref = 0;
      for (size_t i = 0; i < w.size(); ++i) {
        e_gpu += double(deq[i] - w[i]) * (deq[i] - w[i]);
        e_ref += double(ref_deq[i] - w[i]) * (ref_deq[i] - w[i]);
      }
      EXPECT_LE(e_gpu, e_ref * 1.01);
      EXPECT_GT(e_gpu, 0.2 * e_ref);  // still 4-bit rounding, not a copy
    }
    for (int64_t r = 0; r < N; ++r) {
      double amax = 0, err = 0;
      for (int64_t k = 0; k < K; ++k) {
        amax = std::max(amax, double(std::fabs(w[size_t(r * K + k)])));
        err = std::max(err, double(std::fabs(deq[size_t(r * K + k)] - w[size_t(r * K + k)])));
      }
      ASSERT_LE(err, m.step * amax) << "row " << r;
    }
    check_linear(*qgpu, *cpu, gl, deq, nullptr, rng, act, keep);
    // The embedding table: int8 per row under int4 (the tied LM head keeps 8 bits).
    const Tensor emb = qgpu->prepare_weight(Tensor(w.data(), DType::F32, {N, K}), keep);
    EXPECT_EQ(emb.dtype, m.want == DType::GQ4_G128 ? DType::GQ8 : m.want);
    keep.clear();
  }
}

TEST_P(CudaGq, Fp8W8A8MatchesPerTokenQuantisedReference) {
  // --quantize fp8 from kFp8GemmMinTokens tokens: activations rounded to e4m3 per token (scale
  // amax / 448, codes of x * 448 / amax, nearest even, saturating), cuBLASLt FP8 GEMM with the
  // weights' row scales and the tokens' scales. The CPU reference rounds x the same way (the
  // engine's f32_to_e4m3), so only summation order and the output rounding differ; the W8A16
  // path (16-bit x) would miss this bound by the e4m3 rounding of x (~2.5% rel-L2).
  if (!fp8_gemm(DType::GF8, kFp8GemmMinTokens)) GTEST_SKIP() << "FP8 GEMM needs compute capability 8.9+";
  std::mt19937 rng(306);
  auto qgpu = make_gpu_quantized(GetParam(), "fp8");
  for (int64_t K : {576, 2048}) {
    const int64_t N = 1000;
    std::vector<float> w = randn(rng, size_t(N * K), 0.02f);
    ops::Linear host;
    host.in_features = K, host.out_features = N;
    host.parts = {Tensor(w.data(), DType::F32, {600, K}), Tensor(w.data() + 600 * K, DType::F32, {400, K})};
    std::vector<float> bias = rand_act(rng, size_t(N), act, 0.5f);
    const bool with_bias = K == 576;
    if (with_bias) host.bias = upload_f32(*qgpu, bias, {N}, keep);
    const ops::Linear gl = qgpu->prepare_linear(host, keep);
    qgpu->synchronize();
    ASSERT_EQ(gl.parts[0].dtype, DType::GF8);
    std::vector<float> deq = dequant_all(DType::GF8, to_host_bytes(*qgpu, gl.parts[0]).data(), N, K);
    ops::Linear cl = host;
    cl.parts = {Tensor(deq.data(), DType::F32, {N, K})};
    if (with_bias) cl.bias = Tensor(bias.data(), DType::F32, {N});
    for (int64_t T : {kFp8GemmMinTokens, int64_t(64), int64_t(300)}) {
      SCOPED_TRACE(::testing::Message() << "K " << K << " T " << T);
      std::vector<float> x = rand_act(rng, size_t(T * K), act), xq(x.size());
      x[size_t(K + 3)] = 0.f;
      std::fill(x.begin() + 2 * K, x.begin() + 3 * K, 0.f);  // a zero token: scale 0, output = bias
      for (int64_t t = 0; t < T; ++t) {
        float amax = 0.f;
        for (int64_t k = 0; k < K; ++k) amax = std::max(amax, std::fabs(x[size_t(t * K + k)]));
        const float inv = amax > 0.f ? 448.f / amax : 0.f, sx = amax / 448.f;
        for (int64_t k = 0; k < K; ++k)
          xq[size_t(t * K + k)] = e4m3_to_f32(f32_to_e4m3(x[size_t(t * K + k)] * inv)) * sx;
      }
      std::vector<float> want(size_t(T * N), NAN);
      cpu->linear(host_f32(xq, {T, K}), cl, host_f32(want, {T, N}));
      DevTensor dx = dev_from(*qgpu, x, act, {T, K});
      DevTensor out = dev_alloc(*qgpu, act, {T, N});
      poison(*qgpu, out.t);
      qgpu->linear(dx.t, gl, out.t);
      EXPECT_TRUE(close_rows(to_host(*qgpu, out.t), want, size_t(N), act_tol(act), "token"));
      DevTensor o32 = dev_alloc(*qgpu, DType::F32, {T, N});
      poison(*qgpu, o32.t);
      qgpu->linear(dx.t, gl, o32.t);
      EXPECT_TRUE(close_rows(to_host(*qgpu, o32.t), want, size_t(N), f32_tol(), "token")) << "F32 output";
    }
    keep.clear();
  }
}

TEST_P(CudaGq, GgufKQuantPartsFused) {
  // A Q4_K_M-style projection: Q4_K, Q6_K and Q5_K row blocks fused into one int8 / 16 matrix;
  // the CPU computes with the GGUF blocks themselves (its own K-quant kernels).
  std::mt19937 rng(304);
  const int64_t K = 2048;
  using lite_llama::testing::random_gguf_rows;
  std::vector<uint8_t> a = random_gguf_rows(DType::Q4_K, 512, K, rng), b = random_gguf_rows(DType::Q6_K, 256, K, rng),
                       c = random_gguf_rows(DType::Q5_K, 256, K, rng);
  ops::Linear host;
  host.in_features = K, host.out_features = 1024;
  host.parts = {Tensor(a.data(), DType::Q4_K, {512, K}), Tensor(b.data(), DType::Q6_K, {256, K}),
                Tensor(c.data(), DType::Q5_K, {256, K})};
  const ops::Linear gl = gpu->prepare_linear(host, keep);
  settle(*gpu);
  ASSERT_EQ(gl.parts[0].dtype, DType::GQ8_G16);
  std::vector<float> ref = dequant_all(DType::Q4_K, a.data(), 512, K);
  for (auto [t, p, n] : {std::tuple{DType::Q6_K, &b, 256}, std::tuple{DType::Q5_K, &c, 256}}) {
    std::vector<float> r = dequant_all(t, p->data(), n, K);
    ref.insert(ref.end(), r.begin(), r.end());
  }
  check_linear(*gpu, *cpu, gl, ref, nullptr, rng, act, keep);
}

TEST_P(CudaGq, NormAndSwigluWriteIntegerFormForNextGemv) {
  // With int8/int4 weights loaded, RMSNorm and SwiGLU also write their output's integer form
  // (int16 codes, or int8 with gq_int8_act) and the next decode GEMV reads it instead of
  // quantising x itself: the chain must equal the CPU's (int16 codes: within the 16-bit bound).
  for (bool int8_act : {false, true}) {
    SCOPED_TRACE(int8_act ? "int8 codes" : "int16 codes");
    CudaTuning tuning;
    tuning.gq_int8_act = int8_act;
    auto qgpu = make_gpu_quantized(GetParam(), "int4", tuning);
    run_norm_swiglu_chain(*qgpu, *cpu, act, keep, int8_act);
    keep.clear();  // before the backend that allocated it goes
  }
}

namespace {
void run_norm_swiglu_chain(ops::Backend& qgpu_be, ops::Backend& cpu_be, DType act, std::vector<Buffer>& keep,
                           bool int8_act) {
  ops::Backend* qgpu = &qgpu_be;
  ops::Backend* cpu = &cpu_be;
  std::mt19937 rng(305);
  const int64_t H = 1024, F = 2048;
  std::vector<float> w1 = randn(rng, size_t(F * H), 0.03f), w2 = randn(rng, size_t(H * F), 0.03f);
  ops::Linear h1, h2;
  h1.in_features = H, h1.out_features = F, h1.parts = {Tensor(w1.data(), DType::F32, {F, H})};
  h2.in_features = F, h2.out_features = H, h2.parts = {Tensor(w2.data(), DType::F32, {H, F})};
  const ops::Linear g1 = qgpu->prepare_linear(h1, keep), g2 = qgpu->prepare_linear(h2, keep);
  qgpu->synchronize();
  std::vector<float> r1 = dequant_all(g1.parts[0].dtype, to_host_bytes(*qgpu, g1.parts[0]).data(), F, H);
  std::vector<float> r2 = dequant_all(g2.parts[0].dtype, to_host_bytes(*qgpu, g2.parts[0]).data(), H, F);
  ops::Linear c1 = h1, c2 = h2;
  c1.parts = {Tensor(r1.data(), DType::F32, {F, H})};
  c2.parts = {Tensor(r2.data(), DType::F32, {H, F})};
  std::vector<float> nw = rand_act(rng, size_t(H), DType::BF16, 0.3f);
  for (float& v : nw) v += 1.f;
  const Tensor gnw = upload_f32(*qgpu, nw, {H}, keep);
  settle(*qgpu);
  for (int64_t T : {1, 3, 8}) {
    SCOPED_TRACE(::testing::Message() << "T " << T);
    std::vector<float> x = rand_act(rng, size_t(T * H), act), res = rand_act(rng, size_t(T * H), act);
    // CPU: res += x; n = norm(res) * nw; y = n W1^T (as gate|up halves); s = silu(g) u; z = s W2^T
    std::vector<float> cres = res, cn(size_t(T * H)), cy(size_t(T * F)), cs(size_t(T * F / 2)),
                       cz(size_t(T * H));
    // The GPU rounds n and s to 16 bits before quantising; so does the CPU reference here.
    cpu->add_rms_norm(host_f32(cres, {T, H}), host_f32(x, {T, H}), Tensor(nw.data(), DType::F32, {H}), 1e-5f,
                      host_f32(cn, {T, H}));
    for (float& v : cn) v = round_to(act, v);
    cpu->linear(host_f32(cn, {T, H}), c1, host_f32(cy, {T, F}));
    for (float& v : cy) v = round_to(act, v);
    cpu->swiglu(host_f32(cy, {T, F}), host_f32(cs, {T, F / 2}));
    for (float& v : cs) v = round_to(act, v);
    ops::Linear c2h = c2;  // down projection takes F / 2 inputs here: use the first F / 2 columns
    std::vector<float> r2h(size_t(H * F / 2));
    for (int64_t n = 0; n < H; ++n)
      std::copy(r2.begin() + n * F, r2.begin() + n * F + F / 2, r2h.begin() + n * F / 2);
    c2h.in_features = F / 2, c2h.parts = {Tensor(r2h.data(), DType::F32, {H, F / 2})};
    cpu->linear(host_f32(cs, {T, F / 2}), c2h, host_f32(cz, {T, H}));
    DevTensor dx = dev_from(*qgpu, x, act, {T, H}), dres = dev_from(*qgpu, res, act, {T, H});
    DevTensor dn = dev_alloc(*qgpu, act, {T, H}), dy = dev_alloc(*qgpu, act, {T, F}),
              ds = dev_alloc(*qgpu, act, {T, F / 2}), dz = dev_alloc(*qgpu, act, {T, H});
    qgpu->add_rms_norm(dres.t, dx.t, gnw, 1e-5f, dn.t);
    qgpu->linear(dn.t, g1, dy.t);
    qgpu->swiglu(dy.t, ds.t);
    // A GQ matrix of the first F / 2 columns of W2, quantised by the same device quantiser.
    ops::Linear h2h = h2;
    std::vector<float> w2h(size_t(H * F / 2));
    for (int64_t n = 0; n < H; ++n)
      std::copy(w2.begin() + n * F, w2.begin() + n * F + F / 2, w2h.begin() + n * F / 2);
    h2h.in_features = F / 2, h2h.parts = {Tensor(w2h.data(), DType::F32, {H, F / 2})};
    const ops::Linear g2h = qgpu->prepare_linear(h2h, keep);
    qgpu->synchronize();
    std::vector<float> r2q = dequant_all(g2h.parts[0].dtype, to_host_bytes(*qgpu, g2h.parts[0]).data(), H, F / 2);
    c2h.parts = {Tensor(r2q.data(), DType::F32, {H, F / 2})};
    cpu->linear(host_f32(cs, {T, F / 2}), c2h, host_f32(cz, {T, H}));
    qgpu->swiglu(dy.t, ds.t);  // again: prepare_linear ran in between
    qgpu->linear(ds.t, g2h, dz.t);
    // int16 codes: one 16-bit rounding of each output, with the 16-bit bound's room (dz's
    // reference rounds cs as the GPU does, but ds may differ from it by one rounding step).
    const Tol t1 = int8_act ? Tol{1.5e-2, 6e-2} : act_tol(act);
    const Tol t2 = int8_act ? Tol{2.5e-2, 1e-1} : Tol{2 * act_tol(act).rel_l2, 2 * act_tol(act).max_rel};
    EXPECT_TRUE(close_rows(to_host(*qgpu, dy.t), cy, size_t(F), t1, "token")) << "norm -> gate_up";
    EXPECT_TRUE(close_rows(to_host(*qgpu, dz.t), cz, size_t(H), t2, "token")) << "swiglu -> down";
  }
}
}  // namespace

TEST_P(CudaGq, NormIntegerFormServesInt4AndInt8Weights) {
  // A model with int4 and int8 matrices (a GGUF Q4 file keeps some Q8_0): the norm writes one
  // int16 form (in the int4 nibble order, int4 being most of the matrices here) and both kinds'
  // decode GEMVs read it, the int8 one reordering it in registers. Both must match the CPU.
  std::mt19937 rng(311);
  auto g = make_gpu(GetParam());
  const int64_t H = 2048, N = 520;
  struct Part {
    DType t;
    std::vector<uint8_t> rows;
    ops::Linear gl, cl;
    std::vector<float> ref;
  } parts[3] = {{DType::GQ4_G32, {}, {}, {}, {}}, {DType::GQ4_G128, {}, {}, {}, {}}, {DType::GQ8, {}, {}, {}, {}}};
  for (Part& p : parts) {
    p.rows = random_rows(rng, p.t, N, H);
    ops::Linear host;
    host.in_features = H, host.out_features = N;
    host.parts = {Tensor(p.rows.data(), p.t, {N, H})};
    p.gl = g->prepare_linear(host, keep);
    p.ref = dequant_all(p.t, p.rows.data(), N, H);
    p.cl.in_features = H, p.cl.out_features = N;
    p.cl.parts = {Tensor(p.ref.data(), DType::F32, {N, H})};
  }
  std::vector<float> nw = rand_act(rng, size_t(H), DType::BF16, 0.3f);
  for (float& v : nw) v += 1.f;
  const Tensor gnw = upload_f32(*g, nw, {H}, keep);
  settle(*g);
  for (int64_t T : {1, 2}) {  // the default integer GEMV's token counts
    for (int i : {2, 0, 1}) {
      SCOPED_TRACE(::testing::Message() << "T " << T << " " << dtype_name(parts[i].t));
      std::vector<float> x = rand_act(rng, size_t(T * H), act), cn(size_t(T * H)), want(size_t(T * N));
      cpu->rms_norm(host_f32(x, {T, H}), Tensor(nw.data(), DType::F32, {H}), 1e-5f, host_f32(cn, {T, H}));
      for (float& v : cn) v = round_to(act, v);
      cpu->linear(host_f32(cn, {T, H}), parts[i].cl, host_f32(want, {T, N}));
      DevTensor dx = dev_from(*g, x, act, {T, H}), dn = dev_alloc(*g, act, {T, H});
      DevTensor out = dev_alloc(*g, DType::F32, {T, N});
      poison(*g, out.t);
      g->rms_norm(dx.t, gnw, 1e-5f, dn.t);
      g->linear(dn.t, parts[i].gl, out.t);
      // The norm's output may differ from the reference's by one 16-bit rounding.
      EXPECT_TRUE(close_rows(to_host(*g, out.t), want, size_t(N), act_tol(act), "token"));
    }
  }
}

LL_INSTANTIATE_DTYPES(CudaGq);

// CUDA linear (prepare_linear + linear) against the CPU backend: the custom GEMV path (1 token
// by default, 2 on an H200, up to 8 with LITE_LLAMA_GEMV_MAX; K % 8 == 0) and the cuBLASLt path, fused row
// blocks of F32 / BF16 / GGUF-quantised host weights, an optional bias, 16-bit and F32 (logits)
// outputs.
#include "kernels/cuda_test_util.h"

using namespace lite_llama;
using namespace lite_llama::kt;

namespace {

// Host weight part: [rows, K] stored as `dtype`, plus its values as the CPU reads them.
struct HostPart {
  DType dtype;
  int64_t rows, cols;
  std::vector<uint8_t> bytes;
  Tensor tensor() { return Tensor(bytes.data(), dtype, {rows, cols}); }
};

// Random weights with sd 1/sqrt(K) (outputs O(1), so the bias matters), rounded to bf16 so
// that the CUDA backend's conversion to bf16/fp16 is exact: only the product differs.
// Quantised types are quantised from those values with the engine's reference quantisers.
HostPart make_part(std::mt19937& rng, DType t, int64_t rows, int64_t K) {
  HostPart p{t, rows, K, {}};
  std::vector<float> v = randn(rng, size_t(rows * K), 1.0f / std::sqrt(float(K)));
  for (float& x : v) x = round_to(DType::BF16, x);
  const size_t rb = row_bytes(t, K);
  p.bytes.resize(rb * size_t(rows));
  for (int64_t r = 0; r < rows; ++r) quantize_row(t, v.data() + r * K, p.bytes.data() + size_t(r) * rb, K);
  return p;
}

// The same linear layer prepared on both backends.
struct Layer {
  std::vector<HostPart> parts;
  std::vector<float> bias;
  ops::Linear cpu_lin, gpu_lin;
};

void build_layer(Layer& L, ops::Backend& gpu, ops::Backend& cpu, std::vector<Buffer>& keep,
                 std::mt19937& rng, int64_t K, const std::vector<int64_t>& rows,
                 const std::vector<DType>& types, bool bias, DType act) {
  int64_t N = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    L.parts.push_back(make_part(rng, types[i % types.size()], rows[i], K));
    N += rows[i];
  }
  ops::Linear host;
  host.in_features = K;
  host.out_features = N;
  for (HostPart& p : L.parts) host.parts.push_back(p.tensor());
  // Bias values representable in the activation type: the device stores the bias as act.
  L.bias = rand_act(rng, size_t(N), act, 0.5f);
  ops::Linear for_gpu = host;
  if (bias) {
    host.bias = Tensor(L.bias.data(), DType::F32, {N});
    // As the model loader does: F32 bias uploaded first, converted by prepare_linear.
    for_gpu.bias = upload_f32(gpu, L.bias, {N}, keep);
    settle(gpu);  // the upload's DMA must land before prepare_linear converts it on the stream
  }
  L.cpu_lin = cpu.prepare_linear(host, keep);
  L.gpu_lin = gpu.prepare_linear(for_gpu, keep);
  settle(gpu);
  ASSERT_EQ(L.gpu_lin.out_features, N);
  ASSERT_EQ(L.gpu_lin.in_features, K);
}

// Runs one T on both backends; 16-bit output always, F32 output when `f32_out`.
void check_T(ops::Backend& gpu, ops::Backend& cpu, const Layer& L, std::mt19937& rng, int64_t T,
             DType act, Tol tol16, Tol tol32, bool f32_out) {
  const int64_t K = L.gpu_lin.in_features, N = L.gpu_lin.out_features;
  std::vector<float> x = rand_act(rng, size_t(T * K), act);
  std::vector<float> want(size_t(T * N), NAN);
  cpu.linear(host_f32(x, {T, K}), L.cpu_lin, host_f32(want, {T, N}));

  DevTensor dx = dev_from(gpu, x, act, {T, K});
  DevTensor out = dev_alloc(gpu, act, {T, N});
  poison(gpu, out.t);
  gpu.linear(dx.t, L.gpu_lin, out.t);
  EXPECT_TRUE(close_rows(to_host(gpu, out.t), want, size_t(N), tol16, "token")) << dtype_name(act);
  if (f32_out) {
    DevTensor o32 = dev_alloc(gpu, DType::F32, {T, N});
    poison(gpu, o32.t);
    gpu.linear(dx.t, L.gpu_lin, o32.t);
    EXPECT_TRUE(close_rows(to_host(gpu, o32.t), want, size_t(N), tol32, "token")) << "F32 output";
  }
}

// N split into row blocks the way q|k|v or gate|up are.
std::vector<int64_t> split_rows(int64_t N) {
  if (N <= 8) return {N};
  if (N == 200) return {128, 64, 8};
  if (N == 1000) return {512, 256, 232};
  return {N / 2, N / 4, N - N / 2 - N / 4};
}

class CudaLinear : public CudaVsCpu {};

}  // namespace

TEST_P(CudaLinear, GemvAndCublasShapes) {
  std::mt19937 rng(101);
  int idx = 0;
  for (int64_t K : {64, 576, 2048, 3072})
    for (int64_t N : {8, 200, 1000, 4096}) {
      const bool bias = idx++ % 2 == 0;
      // Parts alternate F32 and BF16 host storage (HF checkpoints hold either).
      const std::vector<DType> types = idx % 3 ? std::vector<DType>{DType::F32, DType::BF16}
                                               : std::vector<DType>{DType::BF16, DType::F32};
      Layer L;
      build_layer(L, *gpu, *cpu, keep, rng, K, split_rows(N), types, bias, act);
      if (HasFatalFailure()) return;
      for (int64_t T : {1, 2, 3, 5, 8, 9, 17, 64, 130}) {
        SCOPED_TRACE(::testing::Message() << "K " << K << " N " << N << " T " << T << " bias "
                                          << bias << (T == 1 && K % 8 == 0 ? " (gemv)" : " (cuBLASLt)"));
        // F32 output with a bias on the cuBLASLt path is its own test (F32LogitsWithBias).
        check_T(*gpu, *cpu, L, rng, T, act, act_tol(act), f32_tol(), !bias || T <= 8);
      }
      keep.clear();
    }
}

// swiglu_linear: one token (two where CudaTuning::gemv_max_tokens resolves to 2) of 16-bit weights
// takes the GEMV that computes the SwiGLU of its input row itself; it must equal swiglu then linear
// on the device bit for bit (same formula and rounding), and the CPU's within the usual tolerance.
// K % 64 != 0 and K > 8192 take the two ops instead.
TEST_P(CudaLinear, SwigluFusedIntoOneTokenGemv) {
  std::mt19937 rng(111);
  int idx = 0;
  for (int64_t K : {64, 96, 2048, 8192, 8256})
    for (int64_t N : {8, 1000, 2048}) {
      const bool bias = idx++ % 2 == 0;
      Layer L;
      build_layer(L, *gpu, *cpu, keep, rng, K, split_rows(N), {DType::BF16}, bias, act);
      if (HasFatalFailure()) return;
      for (int64_t T : {1, 2})
        for (DType out_t : {act, DType::F32}) {
          SCOPED_TRACE(::testing::Message() << "K " << K << " N " << N << " T " << T << " bias " << bias
                                            << " out " << dtype_name(out_t));
          std::vector<float> gu = rand_act(rng, size_t(T * 2 * K), act, 2.0f);
          std::vector<float> mlp_h(size_t(T * K)), want(size_t(T * N), NAN);
          cpu->swiglu(host_f32(gu, {T, 2 * K}), host_f32(mlp_h, {T, K}));
          for (float& v : mlp_h) v = round_to(act, v);  // the device keeps the SwiGLU output in act
          cpu->linear(host_f32(mlp_h, {T, K}), L.cpu_lin, host_f32(want, {T, N}));
          DevTensor dgu = dev_from(*gpu, gu, act, {T, 2 * K});
          DevTensor mlp = dev_alloc(*gpu, act, {T, K}), mlp2 = dev_alloc(*gpu, act, {T, K});
          DevTensor fused = dev_alloc(*gpu, out_t, {T, N}), apart = dev_alloc(*gpu, out_t, {T, N});
          poison(*gpu, fused.t);
          poison(*gpu, apart.t);
          gpu->swiglu_linear(dgu.t, L.gpu_lin, mlp.t, fused.t);
          gpu->swiglu(dgu.t, mlp2.t);
          gpu->linear(mlp2.t, L.gpu_lin, apart.t);
          const std::vector<float> got = to_host(*gpu, fused.t);
          EXPECT_EQ(got, to_host(*gpu, apart.t));
          // The device's __expf may round a few SwiGLU outputs the other way: the 16-bit tolerance.
          EXPECT_TRUE(close_rows(got, want, size_t(N), act_tol(act), "token"));
        }
      keep.clear();
    }
}

// linear_swiglu: one token of 16-bit gate|up weights takes the GEMV that applies the SwiGLU to its
// products; it must equal linear then swiglu on the device bit for bit (the products rounded to
// act first, the same formula), and the CPU's within the usual tolerance. Odd F, K % 64 != 0, two
// tokens at gemv_max_tokens 1, an F32 output and the option switched off run nothing (false).
TEST_P(CudaLinear, SwigluAppliedByOneTokenGateUpGemv) {
  CudaTuning off, one;
  off.gate_up_swiglu = false;
  one.gemv_max_tokens = 1;
  std::unique_ptr<ops::Backend> g_off = make_gpu(GetParam(), off), g1 = make_gpu(GetParam(), one);
  std::mt19937 rng(113);
  int idx = 0;
  for (int64_t K : {64, 96, 2048, 2560})
    for (int64_t F : {7, 8, 1000, 9728}) {
      const bool bias = idx++ % 2 == 1;
      Layer L;
      build_layer(L, *gpu, *cpu, keep, rng, K, {F, F}, {DType::BF16, DType::F32}, bias, act);
      if (HasFatalFailure()) return;
      const bool fits = K % 64 == 0 && F % 2 == 0;
      for (int64_t T : {1, 2}) {
        SCOPED_TRACE(::testing::Message() << "K " << K << " F " << F << " T " << T << " bias " << bias);
        std::vector<float> x = rand_act(rng, size_t(T * K), act);
        std::vector<float> gu_h(size_t(T * 2 * F)), want(size_t(T * F), NAN);
        cpu->linear(host_f32(x, {T, K}), L.cpu_lin, host_f32(gu_h, {T, 2 * F}));
        for (float& v : gu_h) v = round_to(act, v);  // the device keeps the products in act
        cpu->swiglu(host_f32(gu_h, {T, 2 * F}), host_f32(want, {T, F}));
        DevTensor dx = dev_from(*gpu, x, act, {T, K});
        DevTensor fused = dev_alloc(*gpu, act, {T, F}), gu = dev_alloc(*gpu, act, {T, 2 * F});
        DevTensor apart = dev_alloc(*gpu, act, {T, F}), f32 = dev_alloc(*gpu, DType::F32, {T, F});
        poison(*gpu, fused.t);
        poison(*gpu, apart.t);
        const bool ran = g1->linear_swiglu(dx.t, L.gpu_lin, fused.t);
        settle(*g1);
        ASSERT_EQ(ran, fits && T == 1);
        EXPECT_FALSE(gpu->linear_swiglu(dx.t, L.gpu_lin, f32.t));
        EXPECT_FALSE(g_off->linear_swiglu(dx.t, L.gpu_lin, apart.t));
        gpu->linear(dx.t, L.gpu_lin, gu.t);
        gpu->swiglu(gu.t, apart.t);
        const std::vector<float> two_ops = to_host(*gpu, apart.t);
        if (ran) {
          EXPECT_EQ(to_host(*gpu, fused.t), two_ops);
        }
        // The device's __expf may round a few SwiGLU outputs the other way: the 16-bit tolerance.
        EXPECT_TRUE(close_rows(two_ops, want, size_t(F), act_tol(act), "token"));
      }
      keep.clear();
    }
}

// CudaTuning::gemv1_loop_blocks_per_sm: the one-token GEMVs (plain, SwiGLU of the input, SwiGLU of
// the gate|up products) on at most 1 or 3 blocks an SM, each looping over row groups, equal bit
// for bit to a block a group (same sums in the same order) and to the CPU within the tolerance;
// the same for gemv1_ordered_prefetch (ordinary loads for the first weights), alone and with 3.
// N 200 has fewer groups than blocks (no loop); 4,096 and 9,728 many more than 132 SMs hold.
TEST_P(CudaLinear, OneTokenGemvLoopingBlocksEqualOneGroupABlock) {
  constexpr int kVariants = 5;  // the last: looping blocks not balanced (CudaTuning::gemv1_loop_balanced)
  const int blocks_per_sm[kVariants] = {1, 3, 0, 3, 3};
  const bool ordered[kVariants] = {false, false, true, true, false};
  std::unique_ptr<ops::Backend> loop[kVariants];
  for (int i = 0; i < kVariants; ++i) {
    CudaTuning t;
    t.gemv1_loop_blocks_per_sm = blocks_per_sm[i];
    t.gemv1_ordered_prefetch = ordered[i];
    t.gemv1_loop_balanced = i < 4;
    loop[i] = make_gpu(GetParam(), t);
  }
  std::mt19937 rng(117);
  for (int64_t K : {64, 2048, 4096})
    for (int64_t N : {200, 4096, 9728}) {
      SCOPED_TRACE(::testing::Message() << "K " << K << " N " << N);
      Layer L, G;
      build_layer(L, *gpu, *cpu, keep, rng, K, split_rows(N), {DType::BF16}, N == 4096, act);
      build_layer(G, *gpu, *cpu, keep, rng, K, {N, N}, {DType::BF16}, false, act);
      if (HasFatalFailure()) return;
      std::vector<float> x = rand_act(rng, size_t(K), act), gu = rand_act(rng, size_t(2 * K), act, 2.0f);
      std::vector<float> want(size_t(N), NAN);
      cpu->linear(host_f32(x, {1, K}), L.cpu_lin, host_f32(want, {1, N}));
      DevTensor dx = dev_from(*gpu, x, act, {1, K}), dgu = dev_from(*gpu, gu, act, {1, 2 * K});
      DevTensor mlp = dev_alloc(*gpu, act, {1, K});
      auto run = [&](ops::Backend& be, DType out_t) {
        DevTensor o = dev_alloc(*gpu, out_t, {1, N}), s = dev_alloc(*gpu, out_t, {1, N});
        DevTensor gs = dev_alloc(*gpu, act, {1, N});
        poison(*gpu, o.t), poison(*gpu, s.t), poison(*gpu, gs.t);
        be.linear(dx.t, L.gpu_lin, o.t);
        be.swiglu_linear(dgu.t, L.gpu_lin, mlp.t, s.t);
        EXPECT_TRUE(be.linear_swiglu(dx.t, G.gpu_lin, gs.t));
        settle(be);
        return std::vector<std::vector<float>>{to_host(*gpu, o.t), to_host(*gpu, s.t), to_host(*gpu, gs.t)};
      };
      for (DType out_t : {act, DType::F32}) {
        const auto base = run(*gpu, out_t);
        EXPECT_TRUE(close_rows(base[0], want, size_t(N), out_t == DType::F32 ? f32_tol() : act_tol(act), "token"));
        for (int i = 0; i < kVariants; ++i) {
          const auto got = run(*loop[i], out_t);
          for (size_t j = 0; j < 3; ++j)
            EXPECT_EQ(got[j], base[j]) << "blocks an SM " << blocks_per_sm[i] << " ordered " << ordered[i] << " op " << j;
        }
      }
      keep.clear();
    }
}

// CudaTuning::gemv_max_tokens >= 2: the GEMV of one or two tokens (one weight read for both)
// serves linear, swiglu_linear and linear_swiglu, each equal bit for bit to the two ops on the same
// backend and to the CPU within the tolerance; with looping blocks (1 and 4 an SM) equal bit for
// bit to a block a row group. Three tokens take the multi-token kernel and the fused forms decline
// (cuBLASLt or that kernel, then SwiGLU).
TEST_P(CudaLinear, FusedGemvOfTwoTokens) {
  constexpr int kVariants = 3;
  const int blocks_per_sm[kVariants] = {0, 1, 4};
  std::unique_ptr<ops::Backend> be[kVariants];
  for (int i = 0; i < kVariants; ++i) {
    CudaTuning t;
    t.gemv_max_tokens = 8;
    t.gemv1_loop_blocks_per_sm = blocks_per_sm[i];
    be[i] = make_gpu(GetParam(), t);
  }
  std::mt19937 rng(119);
  for (int64_t K : {64, 2048})
    for (int64_t N : {200, 4096}) {
      Layer L, G;
      build_layer(L, *gpu, *cpu, keep, rng, K, split_rows(N), {DType::BF16}, N == 200, act);
      build_layer(G, *gpu, *cpu, keep, rng, K, {N, N}, {DType::BF16}, N == 4096, act);
      if (HasFatalFailure()) return;
      for (int64_t T : {1, 2, 3}) {
        SCOPED_TRACE(::testing::Message() << "K " << K << " N " << N << " T " << T);
        const bool fused = T <= 2;  // kGemv1MaxTokens
        std::vector<float> x = rand_act(rng, size_t(T * K), act), gu = rand_act(rng, size_t(T * 2 * K), act, 2.0f);
        std::vector<float> want(size_t(T * N), NAN), mlp_h(size_t(T * K)), want_s(size_t(T * N), NAN);
        cpu->linear(host_f32(x, {T, K}), L.cpu_lin, host_f32(want, {T, N}));
        cpu->swiglu(host_f32(gu, {T, 2 * K}), host_f32(mlp_h, {T, K}));
        for (float& v : mlp_h) v = round_to(act, v);  // the device keeps the SwiGLU output in act
        cpu->linear(host_f32(mlp_h, {T, K}), L.cpu_lin, host_f32(want_s, {T, N}));
        DevTensor dx = dev_from(*gpu, x, act, {T, K}), dgu = dev_from(*gpu, gu, act, {T, 2 * K});
        DevTensor mlp = dev_alloc(*gpu, act, {T, K});
        auto run = [&](ops::Backend& b) {
          DevTensor o = dev_alloc(*gpu, act, {T, N}), s = dev_alloc(*gpu, act, {T, N});
          DevTensor gs = dev_alloc(*gpu, act, {T, N}), g_two = dev_alloc(*gpu, act, {T, N});
          DevTensor s_two = dev_alloc(*gpu, act, {T, N}), gu_out = dev_alloc(*gpu, act, {T, 2 * N});
          poison(*gpu, o.t), poison(*gpu, s.t), poison(*gpu, gs.t);
          b.linear(dx.t, L.gpu_lin, o.t);
          b.swiglu_linear(dgu.t, L.gpu_lin, mlp.t, s.t);
          EXPECT_EQ(b.linear_swiglu(dx.t, G.gpu_lin, gs.t), fused);
          // The same as two ops on this backend: SwiGLU then the GEMV, the GEMV then SwiGLU.
          b.swiglu(dgu.t, mlp.t);
          b.linear(mlp.t, L.gpu_lin, s_two.t);
          b.linear(dx.t, G.gpu_lin, gu_out.t);
          b.swiglu(gu_out.t, g_two.t);
          settle(b);
          EXPECT_EQ(to_host(*gpu, s.t), to_host(*gpu, s_two.t)) << "swiglu_linear";
          if (fused) {
            EXPECT_EQ(to_host(*gpu, gs.t), to_host(*gpu, g_two.t)) << "linear_swiglu";
          }
          return std::vector<std::vector<float>>{to_host(*gpu, o.t), to_host(*gpu, s.t), to_host(*gpu, g_two.t)};
        };
        const auto base = run(*be[0]);
        EXPECT_TRUE(close_rows(base[0], want, size_t(N), act_tol(act), "token"));
        EXPECT_TRUE(close_rows(base[1], want_s, size_t(N), act_tol(act), "token"));
        for (int i = 1; i < kVariants; ++i) {
          const auto got = run(*be[i]);
          for (size_t j = 0; j < 3; ++j) EXPECT_EQ(got[j], base[j]) << "blocks an SM " << blocks_per_sm[i] << " op " << j;
        }
      }
      keep.clear();
    }
}

// The backend's GEMV serves 1 token by default (2 on an H200; cuBLASLt was faster at 2 on the
// H100); its multi-token kernels stay reachable through CudaTuning::gemv_max_tokens and are
// checked here.
TEST_P(CudaLinear, GemvUpTo8TokensWhenSwitchedOn) {
  CudaTuning t;
  t.gemv_max_tokens = 8;
  std::unique_ptr<ops::Backend> g8 = make_gpu(GetParam(), t);
  std::vector<Buffer> keep8;  // destroyed before g8
  std::mt19937 rng(103);
  for (int64_t K : {64, 200, 2048})  // 200: one token on the warp-per-row kernel (K % 64 != 0)
    for (int64_t N : {200, 4096}) {
      Layer L;
      build_layer(L, *g8, *cpu, keep8, rng, K, split_rows(N), {DType::BF16, DType::F32}, N == 200, act);
      if (HasFatalFailure()) return;
      for (int64_t T : {1, 2, 3, 5, 8}) {
        SCOPED_TRACE(::testing::Message() << "K " << K << " N " << N << " T " << T << " (gemv)");
        check_T(*g8, *cpu, L, rng, T, act, act_tol(act), f32_tol(), true);
      }
      keep8.clear();
    }
}

TEST_P(CudaLinear, QuantizedWeightsConvertedAtUpload) {
  // GGUF Q8_0 / Q4_1 / Q4_0 parts stay quantised on the GPU (repacked into one int8 / 32 GQ
  // matrix, tests/kernels/test_gq.cpp); up to 8 tokens the GEMV quantises activations to int8
  // per block of 32 (~0.5% relative, see int_path_tol there), above that the dequantised tiles
  // go through cuBLASLt with the 16-bit bound.
  std::mt19937 rng(102);
  for (int64_t K : {64, 576, 2048})
    for (int64_t N : {200, 1000}) {
      Layer L;
      build_layer(L, *gpu, *cpu, keep, rng, K, split_rows(N),
                  {DType::Q8_0, DType::Q4_1, DType::Q4_0}, K == 576, act);
      if (HasFatalFailure()) return;
      for (int64_t T : {1, 4, 8, 17, 64}) {
        SCOPED_TRACE(::testing::Message() << "K " << K << " N " << N << " T " << T);
        const Tol tol = T <= 8 ? Tol{1.5e-2, 6e-2} : act_tol(act);
        check_T(*gpu, *cpu, L, rng, T, act, tol, tol, K != 576 || T <= 8);
      }
      keep.clear();
    }
}

TEST_P(CudaLinear, SinglePartQ8_0AndQ4_1) {
  std::mt19937 rng(103);
  for (DType t : {DType::Q8_0, DType::Q4_1}) {
    Layer L;
    build_layer(L, *gpu, *cpu, keep, rng, 3072, {1000}, {t}, false, act);
    if (HasFatalFailure()) return;
    for (int64_t T : {1, 3, 8, 9, 130}) {
      SCOPED_TRACE(::testing::Message() << dtype_name(t) << " T " << T);
      const Tol tol = T <= 8 ? Tol{1.5e-2, 6e-2} : act_tol(act);  // as above
      check_T(*gpu, *cpu, L, rng, T, act, tol, tol, true);
    }
    keep.clear();
  }
}

TEST_P(CudaLinear, OddShapes) {
  // K not a multiple of 8 sends even one token to cuBLASLt (the GEMV needs 16-byte rows);
  // N odd gives output rows that are not 16-byte aligned; N = 1 is a single output column.
  std::mt19937 rng(104);
  const int64_t shapes[][2] = {{100, 1001}, {72, 1001}, {64, 1}, {136, 24}, {8, 40}};
  for (const auto& s : shapes) {
    Layer L;
    build_layer(L, *gpu, *cpu, keep, rng, s[0], {s[1]}, {DType::F32}, false, act);
    if (HasFatalFailure()) return;
    for (int64_t T : {1, 3, 8, 9, 33}) {
      SCOPED_TRACE(::testing::Message() << "K " << s[0] << " N " << s[1] << " T " << T);
      check_T(*gpu, *cpu, L, rng, T, act, act_tol(act), f32_tol(), true);
    }
    keep.clear();
  }
}

TEST_P(CudaLinear, F32LogitsWithBias) {
  // The cuBLASLt epilogue with a 16-bit bias and an F32 output (an LM head with a bias); the
  // GEMV path is covered by GemvAndCublasShapes.
  std::mt19937 rng(105);
  Layer L;
  build_layer(L, *gpu, *cpu, keep, rng, 576, {1000}, {DType::BF16}, true, act);
  if (HasFatalFailure()) return;
  for (int64_t T : {1, 9, 64}) {
    SCOPED_TRACE(::testing::Message() << "T " << T);
    check_T(*gpu, *cpu, L, rng, T, act, act_tol(act), f32_tol(), true);
  }
}

// F32 logits into rows wider than the layer (Decoder::logit_cols: an LM head of 1001 outputs
// writes rows of 1004 columns, 16-byte aligned): the layer's columns equal the CPU's, on the GEMV
// and cuBLASLt paths, and the padding columns are left as they were.
TEST_P(CudaLinear, F32LogitsIntoPaddedRows) {
  std::mt19937 rng(106);
  Layer L;
  const int64_t K = 576, N = 1001, P = 1004;
  build_layer(L, *gpu, *cpu, keep, rng, K, {N}, {DType::BF16}, false, act);
  if (HasFatalFailure()) return;
  for (int64_t T : {1, 9, 64, 256}) {
    SCOPED_TRACE(::testing::Message() << "T " << T);
    std::vector<float> x = rand_act(rng, size_t(T * K), act);
    std::vector<float> want(size_t(T * N), NAN);
    cpu->linear(host_f32(x, {T, K}), L.cpu_lin, host_f32(want, {T, N}));
    DevTensor dx = dev_from(*gpu, x, act, {T, K});
    std::vector<float> init(size_t(T * P), 7.f);
    DevTensor out = dev_from(*gpu, init, DType::F32, {T, P});
    gpu->linear(dx.t, L.gpu_lin, out.t);
    const std::vector<float> got = to_host(*gpu, out.t);
    std::vector<float> cols;
    for (int64_t t = 0; t < T; ++t) {
      cols.insert(cols.end(), got.begin() + t * P, got.begin() + t * P + N);
      for (int64_t c = N; c < P; ++c) ASSERT_EQ(got[size_t(t * P + c)], 7.f) << "row " << t << " padding " << c;
    }
    EXPECT_TRUE(close_rows(cols, want, size_t(N), f32_tol(), "token"));
  }
}

TEST_P(CudaLinear, TunedAlgorithmsMatchTheCpu) {
  // Backend::tune_linears times cuBLASLt's candidates for each token count's bucket over layers of
  // one shape and keeps the fastest; whichever it keeps (split-K or not), the products stay within
  // the CPU's tolerance, at the tuned counts and at others of their buckets (20 and 24 share 32's).
  // A bucket is tuned once; the GEMV's token counts are not tuned; with CudaTuning::gemm_tune off
  // (the default) nothing is.
  std::mt19937 rng(107);
  {
    Layer l;
    build_layer(l, *gpu, *cpu, keep, rng, 256, {256}, {DType::BF16}, false, act);
    if (HasFatalFailure()) return;
    EXPECT_EQ(gpu->tune_linears({&l.gpu_lin}, act, {4, 8}), std::make_pair(0, 0));
    keep.clear();
  }
  CudaTuning t;
  t.gemm_tune = true;
  gpu = make_gpu(GetParam(), t);
  for (const bool bias : {false, true}) {
    Layer layers[3];
    for (Layer& l : layers) build_layer(l, *gpu, *cpu, keep, rng, 2048, {2048, 512, 512}, {DType::BF16}, bias, act);
    if (HasFatalFailure()) return;
    const std::vector<const ops::Linear*> same = {&layers[0].gpu_lin, &layers[1].gpu_lin, &layers[2].gpu_lin};
    for (DType out_t : {act, DType::F32}) {
      SCOPED_TRACE(::testing::Message() << "bias " << bias << " out " << dtype_name(out_t));
      const auto [made, changed] = gpu->tune_linears(same, out_t, {1, 2, 4, 8, 24, 64});
      if (bias && out_t == DType::F32) {  // an fp32 output adds its bias apart: the products tuned above
        EXPECT_EQ(made, 0);
      } else {
        EXPECT_GE(made, 4);  // 4, 8, 32 and 64 on cuBLASLt; 2 too where the GEMV takes one token only
        EXPECT_LE(made, 5);
      }
      EXPECT_LE(changed, made);
      EXPECT_EQ(gpu->tune_linears(same, out_t, {4, 8, 24, 64}), std::make_pair(0, 0));
    }
    for (int64_t T : {4, 8, 20, 24, 64})
      for (const Layer& l : layers) {
        SCOPED_TRACE(::testing::Message() << "bias " << bias << " T " << T);
        check_T(*gpu, *cpu, l, rng, T, act, act_tol(act), f32_tol(), true);
      }
    keep.clear();
  }
}

TEST_P(CudaLinear, RepeatedCallsReuseCachedPlans) {
  // The cuBLASLt plan cache is keyed by shape and shares one descriptor per key; the bias
  // pointer is set on it per call. Layers of one shape with different biases (and one without),
  // called alternately, must each see their own bias.
  std::mt19937 rng(106);
  Layer a, b, c;
  build_layer(a, *gpu, *cpu, keep, rng, 576, {64, 64}, {DType::BF16}, true, act);
  build_layer(b, *gpu, *cpu, keep, rng, 576, {128}, {DType::F32}, true, act);
  build_layer(c, *gpu, *cpu, keep, rng, 576, {128}, {DType::F32}, false, act);
  if (HasFatalFailure()) return;
  for (int rep = 0; rep < 3; ++rep)
    for (const Layer* l : {&a, &b, &c}) {
      SCOPED_TRACE(::testing::Message() << "rep " << rep << " layer " << (l == &a ? "a" : l == &b ? "b" : "c"));
      check_T(*gpu, *cpu, *l, rng, 40, act, act_tol(act), f32_tol(), false);
    }
}

TEST_P(CudaLinear, ArenaOffsetPointers) {
  // The decoder carves activations out of one arena at 64-element (128-byte) offsets; the
  // GEMV needs only 16-byte alignment. cuBLASLt's plans are chosen without pointers, so x and
  // out at such offsets must still work on both paths.
  std::mt19937 rng(107);
  Layer L;
  build_layer(L, *gpu, *cpu, keep, rng, 576, {512, 488}, {DType::BF16}, true, act);
  if (HasFatalFailure()) return;
  const int64_t K = 576, N = 1000;
  for (size_t offset : {size_t(128), size_t(16), size_t(384)})
    for (int64_t T : {3, 8, 9, 64}) {
      SCOPED_TRACE(::testing::Message() << "offset " << offset << " bytes, T " << T);
      std::vector<float> x = rand_act(rng, size_t(T * K), act);
      std::vector<float> want(size_t(T * N), NAN);
      cpu->linear(host_f32(x, {T, K}), L.cpu_lin, host_f32(want, {T, N}));
      Buffer arena = gpu->alloc(size_t(T * (K + N)) * 2 + 4 * offset);
      uint8_t* base = arena.as<uint8_t>();
      Tensor dx(base + offset, act, {T, K}, Device::CUDA);
      Tensor out(base + 2 * offset + size_t(T * K) * 2, act, {T, N}, Device::CUDA);
      const std::vector<uint8_t> xb = encode(x, act);
      gpu->copy_to_device(dx.data, xb.data(), xb.size());
      poison(*gpu, out);
      gpu->linear(dx, L.gpu_lin, out);
      ASSERT_TRUE(close_rows(to_host(*gpu, out), want, size_t(N), act_tol(act), "token"));
    }
}

LL_INSTANTIATE_DTYPES(CudaLinear);

// CpuBackend::linear against cpu::ref::linear for every weight type, over many shapes, with
// weights split in several row blocks (ops::Linear parts) and a bias. Both the default fp32
// path (gemm_f32) and the int8-activation path (LITE_LLAMA_CPU_Q8=1) are covered, and the GGUF
// K-quants (Q4_K, Q5_K, Q6_K) on the fp32 path; at the end the int16-code one-token GEMV
// (LITE_LLAMA_CPU_INT16) per kernel set against a double-precision reference.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "backend_test_util.h"
#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/gemm_f32.h"
#include "backends/cpu/ref_ops.h"
#include "backends/cpu/vec_dot.h"
#include "common/random_blocks.h"

using namespace lite_llama;
using namespace lite_llama::test;
namespace ref = lite_llama::cpu::ref;

namespace {

bool kquant(DType t) { return t == DType::Q4_K || t == DType::Q5_K || t == DType::Q6_K; }

// K-quant weights from random blocks (the engine has no K-quant quantiser; every bit pattern of
// the packed scales and quants is a valid weight, and random_kquant_row keeps d/dmin finite).
Weight make_kquant_weight(std::mt19937& rng, DType t, int64_t rows, int64_t K) {
  Weight w{t, rows, K, {}};
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<uint8_t> row = random_kquant_row(rng, t, K);
    w.bytes.insert(w.bytes.end(), row.begin(), row.end());
  }
  return w;
}

// Length of the longest chain of dependent fp32 additions in one output of gemm_f32: each SIMD
// lane accumulates K/lanes products, then the lanes are summed as a tree (log2 lanes levels).
// Without SIMD (or K not a multiple of 32) the scalar fallback sums all K products in a row.
double chain_length(int64_t K, const std::string& isa) {
  const int lanes = isa == "avx512" ? 16 : isa == "avx2" ? 8 : 1;
  if (lanes == 1 || K % 32 != 0) return double(K);
  return double(K) / lanes + 4;
}

struct Case {
  DType wtype;
  std::vector<int64_t> parts;  // rows of each block
  bool bias;
};

// Runs backend.linear and the reference for one shape and checks every output.
// Bound (default path): the reference sums in double, so the difference is the backend's fp32
// error: a sum of products, each rounded once (2u with the weight's own dequantisation, which
// may be fused into an FMA on one side only), accumulated along a chain of at most L additions:
// |err| <= (L + 2) u sum_k |x_k w_k| (+ u |result| for the bias add). That is ~1e-5 relative to
// sum |x w| at K = 1536 and far below what a wrong block, nibble or row offset produces.
// Int8 path: x is quantised per 32-block to q * d with |x - q d| <= d / 2, d = amax_block / 127,
// which adds sum_blocks (d_b / 2) sum_{k in b} |w_k| (1% slack for the rounding of 1/d).
// int16_levels = 32767: the int16-code path (CpuTuning::int16_activations), same rule with
// d = amax / 32767, 2% for the rounding of d and x / d, and |w - m| in place of |w| (Q4_1's
// m * sum(x) uses the unquantised sum).
void check_linear(ops::Backend& be, std::mt19937& rng, const Case& c, int64_t T, int64_t K,
                  bool q8_path, const std::string& isa = cpu::gemm_f32_isa(), int int16_levels = 0) {
  int64_t N = 0;
  for (int64_t n : c.parts) N += n;
  std::vector<Weight> ws;
  ops::Linear lin;
  lin.in_features = K;
  lin.out_features = N;
  for (int64_t n : c.parts)
    ws.push_back(kquant(c.wtype) ? make_kquant_weight(rng, c.wtype, n, K)
                                 : make_weight(rng, c.wtype, n, K));
  for (Weight& w : ws) lin.parts.push_back(w.tensor());
  std::vector<float> bias = randn(rng, size_t(N));
  if (c.bias) lin.bias = Tensor(bias.data(), DType::F32, {N});
  std::vector<float> x = randn(rng, size_t(T * K));
  std::vector<float> out(size_t(T * N), NAN);
  be.linear(Tensor(x.data(), DType::F32, {T, K}), lin, Tensor(out.data(), DType::F32, {T, N}));

  std::vector<float> want(size_t(T * N), NAN);
  std::vector<float> wvals;  // dequantised weights [N, K]
  int64_t col0 = 0;
  for (Weight& w : ws) {
    ref::linear(x.data(), T, K, w.bytes.data(), w.dtype, w.rows,
                c.bias ? bias.data() + col0 : nullptr, want.data() + col0, N);
    std::vector<float> v = w.values();
    wvals.insert(wvals.end(), v.begin(), v.end());
    col0 += w.rows;
  }
  const bool int_types = c.wtype == DType::Q4_0 || c.wtype == DType::Q4_1 || c.wtype == DType::Q8_0;
  const bool int8 = (q8_path || int16_levels > 0) && int_types;
  const double levels = q8_path ? 127 : int16_levels, slack = q8_path ? 1.01 : 1.02;
  std::vector<double> mins(size_t(N * (K / 32)), 0.0);  // Q4_1's block offsets, int16 rule
  if (int16_levels > 0 && c.wtype == DType::Q4_1) {
    int64_t r0 = 0;
    for (Weight& w : ws)
      for (int64_t r = 0; r < w.rows; ++r, ++r0)
        for (int64_t b = 0; b < K / 32; ++b)
          mins[size_t(r0 * (K / 32) + b)] = f16_to_f32(
              (reinterpret_cast<const BlockQ4_1*>(w.bytes.data() + size_t(r) * row_bytes(w.dtype, K)) + b)->m);
  }
  const double L =
      int8 ? double(K) / 8 + 16 : chain_length(K, isa);  // int8 path: int32 sums, fp32 over blocks
  int bad = 0;
  for (int64_t t = 0; t < T; ++t)
    for (int64_t n = 0; n < N; ++n) {
      double mag = 0, qerr = 0;
      for (int64_t k = 0; k < K; ++k)
        mag += std::fabs(double(x[size_t(t * K + k)]) * wvals[size_t(n * K + k)]);
      if (int8)
        for (int64_t b0 = 0; b0 < K; b0 += 32) {
          double amax = 0, wsum = 0;
          const double m = mins[size_t(n * (K / 32) + b0 / 32)];
          for (int64_t k = b0; k < b0 + 32; ++k) {
            amax = std::max(amax, double(std::fabs(x[size_t(t * K + k)])));
            wsum += std::fabs(wvals[size_t(n * K + k)] - m);
          }
          qerr += amax / levels / 2 * wsum * slack;
        }
      const double w = want[size_t(t * N + n)], g = out[size_t(t * N + n)];
      const double tol = (L + 2) * kU * mag + kU * std::fabs(w) + qerr + 1e-30;
      if (!(std::fabs(g - w) <= tol) && bad++ < 5)
        ADD_FAILURE() << dtype_name(c.wtype) << (int8 ? " int8" : "") << " T=" << T << " K=" << K
                      << " N=" << N << " out[" << t << "," << n << "] = " << g << ", ref " << w
                      << " (tol " << tol << ")";
    }
  EXPECT_EQ(bad, 0);
}

const std::vector<Case>& cases() {
  // Part layouts: one odd block, three blocks of odd total (like q/k/v), blocks that are not
  // multiples of the 16-row work unit, and a single row.
  static const std::vector<Case> cs = [] {
    std::vector<Case> v;
    for (DType t : {DType::F32, DType::F16, DType::BF16, DType::Q4_0, DType::Q4_1, DType::Q8_0}) {
      v.push_back({t, {7, 17, 9}, true});
      v.push_back({t, {37}, false});
      v.push_back({t, {1}, true});
      v.push_back({t, {16, 5}, false});
    }
    return v;
  }();
  return cs;
}

const int64_t kTs[] = {1, 2, 3, 7, 8, 9, 33};

std::unique_ptr<ops::Backend> make_backend(bool int8_activations,
                                           CpuIsaChoice isa = CpuIsaChoice::Auto) {
  CpuTuning t;
  t.q8_activations = int8_activations;
  t.int16_activations = false;  // the fp32 bound; the int16 path has its own tests below
  t.isa = isa;
  return cpu::make_cpu_backend(2, t);
}

// Every kernel set this CPU runs (the generic one always), with its name.
std::vector<std::pair<CpuIsaChoice, std::string>> isas_here() {
  std::vector<std::pair<CpuIsaChoice, std::string>> v = {{CpuIsaChoice::Generic, "generic"}};
  const cpu::CpuIsa best = cpu::detect_cpu_isa();
  if (best == cpu::CpuIsa::Avx2 || best == cpu::CpuIsa::Avx512) v.push_back({CpuIsaChoice::Avx2, "avx2"});
  if (best == cpu::CpuIsa::Avx512) v.push_back({CpuIsaChoice::Avx512, "avx512"});
  return v;
}

}  // namespace

TEST(CpuLinear, MatchesReferenceAllTypesAndShapes) {
  for (const auto& [isa, name] : isas_here()) {
    SCOPED_TRACE(name);
    auto be = make_backend(false, isa);
    EXPECT_NE(be->name().find(name + " kernels"), std::string::npos) << be->name();
    std::mt19937 rng(101);
    for (const Case& c : cases())
      for (int64_t K : {32, 64, 576, 1536})
        for (int64_t T : kTs) check_linear(*be, rng, c, T, K, false, name);
  }
}

TEST(CpuLinear, ForcedKernelSetTheCpuLacksIsAnError) {
  if (cpu::detect_cpu_isa() == cpu::CpuIsa::Avx512) GTEST_SKIP() << "this CPU runs every kernel set";
  EXPECT_THROW(make_backend(false, CpuIsaChoice::Avx512), std::runtime_error);
}

// Q4_K/Q5_K/Q6_K: K is a multiple of the 256-element super-block. Same part layouts and bound
// as above (the weights' dequantisation is bit-exact, gemm_kquants.h). With int8 activations
// requested, K-quant weights still take the fp32 path, so the fp32 bound holds there too.
TEST(CpuLinear, KQuantsMatchReference) {
  for (bool int8 : {false, true}) {
    auto be = make_backend(int8);
    std::vector<uint8_t> raw(1024);  // two rows of any of these types
    std::vector<Buffer> keep;
    for (DType t : {DType::Q4_K, DType::Q5_K, DType::Q6_K})
      EXPECT_NO_THROW(be->prepare_weight(Tensor(raw.data(), t, {2, 256}), keep));
    for (DType t : {DType::Q2_K, DType::Q3_K, DType::Q8_K})  // no dot product for these
      EXPECT_THROW(be->prepare_weight(Tensor(raw.data(), t, {2, 256}), keep), std::runtime_error);
    std::mt19937 rng(int8 ? 107 : 106);
    for (DType t : {DType::Q4_K, DType::Q5_K, DType::Q6_K})
      for (const std::vector<int64_t>& parts : {std::vector<int64_t>{7, 17, 9},
                                                std::vector<int64_t>{37}, std::vector<int64_t>{1},
                                                std::vector<int64_t>{16, 5}})
        for (int64_t K : {256, 512, 1536, 2560})
          for (int64_t T : kTs) check_linear(*be, rng, {t, parts, parts.size() != 1}, T, K, int8);
  }
}

// x = the identity (T = K tokens) makes out[t, n] = W[n, t] exactly: every dequantised weight of
// every sub-block must equal dequantize_row's, bit for bit, for both the decode tiles (T = 1)
// and the prefill tiles. Q4_0/Q4_1/Q8_0's decode tiles take the block scale and offset out of
// the sum (d * q + m * 1): still one rounding of a value the reference rounds once.
TEST(CpuLinear, WeightsDequantiseExactly) {
  for (const auto& [isa, name] : isas_here()) {
    const cpu::Kernels& kern = cpu::kernels_for(cpu::choose_cpu_isa(isa));
    std::mt19937 rng(108);
    for (DType t : {DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::Q4_0, DType::Q4_1, DType::Q8_0}) {
      const int64_t K = 512, N = 11;
      Weight w = kquant(t) ? make_kquant_weight(rng, t, N, K) : make_weight(rng, t, N, K);
      const std::vector<float> want = w.values();
      std::vector<float> eye(size_t(K * K), 0.f);
      for (int64_t k = 0; k < K; ++k) eye[size_t(k * K + k)] = 1.f;
      std::vector<float> out(size_t(K * N), NAN);
      cpu::gemm_f32(kern, t, w.bytes.data(), row_bytes(t, K), N, eye.data(), K, K, out.data(), N);
      for (int64_t k = 0; k < K; ++k)
        for (int64_t n = 0; n < N; ++n)
          ASSERT_EQ(out[size_t(k * N + n)], want[size_t(n * K + k)])
              << name << " " << dtype_name(t) << " row " << n << " k " << k;
      for (int64_t k = 0; k < K; k += 37) {  // one token at a time: the decode tile
        std::vector<float> o1(size_t(N), NAN);
        cpu::gemm_f32(kern, t, w.bytes.data(), row_bytes(t, K), N, eye.data() + k * K, 1, K, o1.data(), N);
        for (int64_t n = 0; n < N; ++n)
          ASSERT_EQ(o1[size_t(n)], want[size_t(n * K + k)])
              << name << " " << dtype_name(t) << " T=1 row " << n << " k " << k;
      }
    }
  }
}

TEST(CpuLinear, FloatWeightsKNotMultipleOf32) {
  // K = 40, 72 and 5: the scalar fallback of gemm_f32.
  auto be = make_backend(false);
  std::mt19937 rng(102);
  for (DType t : {DType::F32, DType::F16, DType::BF16})
    for (int64_t K : {5, 40, 72})
      for (int64_t T : kTs) {
        check_linear(*be, rng, {t, {7, 17, 9}, true}, T, K, false);
        check_linear(*be, rng, {t, {3}, false}, T, K, false);
      }
}

TEST(CpuLinear, Int8ActivationPath) {
  auto be = make_backend(true);
  EXPECT_NE(be->name().find("int8"), std::string::npos) << be->name();
  std::mt19937 rng(103);
  for (const Case& c : cases())
    for (int64_t K : {32, 64, 576, 1536})
      for (int64_t T : kTs) check_linear(*be, rng, c, T, K, true);
}

TEST(CpuLinear, Int8PathIsMeasurablyDifferentFromFp32) {
  // Guards the test above: if LITE_LLAMA_CPU_Q8 were ignored, the int8 bound would pass
  // trivially. With x quantised to int8 the result differs from the fp32 path by far more
  // than fp32 rounding.
  auto q8 = make_backend(true);
  auto f32 = make_backend(false);
  std::mt19937 rng(104);
  const int64_t T = 3, K = 256, N = 8;
  Weight w = make_weight(rng, DType::Q8_0, N, K);
  ops::Linear lin;
  lin.parts.push_back(w.tensor());
  lin.in_features = K;
  lin.out_features = N;
  std::vector<float> x = randn(rng, size_t(T * K));
  std::vector<float> a(size_t(T * N)), b(size_t(T * N));
  q8->linear(Tensor(x.data(), DType::F32, {T, K}), lin, Tensor(a.data(), DType::F32, {T, N}));
  f32->linear(Tensor(x.data(), DType::F32, {T, K}), lin, Tensor(b.data(), DType::F32, {T, N}));
  double diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff = std::max(diff, double(std::fabs(a[i] - b[i])));
  EXPECT_GT(diff, 1e-4);
}

TEST(CpuLinear, RejectsMismatchedShapes) {
  auto be = make_backend(false);
  std::mt19937 rng(105);
  Weight w = make_weight(rng, DType::F32, 4, 32);
  ops::Linear lin;
  lin.parts.push_back(w.tensor());
  lin.in_features = 32;
  lin.out_features = 4;
  std::vector<float> x(2 * 64), out(2 * 4);
  EXPECT_THROW(be->linear(Tensor(x.data(), DType::F32, {2, 64}), lin,
                          Tensor(out.data(), DType::F32, {2, 4})),
               std::runtime_error);
  EXPECT_THROW(be->linear(Tensor(x.data(), DType::F32, {2, 32}), lin,
                          Tensor(out.data(), DType::F32, {1, 8})),
               std::runtime_error);
}

// Q5_0 / Q5_1 are converted at load: Q5_0 to Q8_0 with the same values (exact), Q5_1 to F16
// (one rounding of each value).
TEST(CpuLinear, Q5WeightsConvertedAtLoad) {
  auto be = make_backend(false);
  std::mt19937 rng(108);
  std::vector<Buffer> keep;
  for (DType t : {DType::Q5_0, DType::Q5_1}) {
    SCOPED_TRACE(dtype_name(t));
    const int64_t rows = 5, K = 320;
    std::vector<uint8_t> raw = lite_llama::testing::random_gguf_rows(t, rows, K, rng);
    const Tensor p = be->prepare_weight(Tensor(raw.data(), t, {rows, K}), keep);
    EXPECT_EQ(p.dtype, t == DType::Q5_0 ? DType::Q8_0 : DType::F16);
    std::vector<float> want(static_cast<size_t>(K)), got(static_cast<size_t>(K));
    for (int64_t r = 0; r < rows; ++r) {
      dequantize_row(t, raw.data() + size_t(r) * row_bytes(t, K), want.data(), K);
      dequantize_row(p.dtype, p.row(r), got.data(), K);
      for (int64_t k = 0; k < K; ++k) {
        if (t == DType::Q5_0) ASSERT_EQ(got[size_t(k)], want[size_t(k)]) << r << "," << k;
        else ASSERT_NEAR(got[size_t(k)], want[size_t(k)], std::fabs(want[size_t(k)]) / 1024 + 1e-7) << r << "," << k;
      }
    }
  }
}

// ---- int16 activation codes (CpuTuning::int16_activations, gemv_int16.h) ----------------------

namespace {

// The block offset m of Q4_1 (0 for the other types): the int16 path's error scales with
// |w - m| = d |q|, since m * sum(x) uses the unquantised sum.
double block_min(const Weight& w, int64_t r, int64_t b) {
  if (w.dtype != DType::Q4_1) return 0;
  const auto* blk = reinterpret_cast<const BlockQ4_1*>(w.bytes.data() + size_t(r) * row_bytes(w.dtype, w.cols)) + b;
  return f16_to_f32(blk->m);
}

struct I16Result {
  std::vector<float> out;
  std::vector<double> want, tol;
};

// One token through a kernel set's quantize_i16 + gemm_i16, with the double-precision result
// of the dequantised weights times the unquantised x, and the bound each output must meet:
//   activation rounding: |x - d c| <= d / 2 with d = amax_b / 32767, widened by 2% for the
//     float rounding of d and of x * (32767 / amax) (<= 3 ulp of a code <= 32767: 0.006 of a
//     code unit against 0.5), times sum_k |w_k - m_b| per block;
//   fp32: a lane adds one rounded product per block (chain nb), then an 8-lane tree and the
//     offset chain: (nb + 10) u times the magnitude sum_k |w_k x_k| + sum_b |m_b sum_b x| + the
//     rounding term itself.
I16Result run_i16(const cpu::Kernels& k, const Weight& w, const std::vector<float>& x) {
  const int64_t N = w.rows, K = w.cols, nb = K / 32;
  std::vector<int16_t> q(static_cast<size_t>(K));
  std::vector<float> d(static_cast<size_t>(nb)), s(static_cast<size_t>(nb));
  std::vector<int32_t> qs(static_cast<size_t>(nb));
  const cpu::ActI16 act{q.data(), d.data(), s.data(), qs.data()};
  k.quantize_i16(x.data(), K, cpu::int16_q4_order(w.dtype), act);
  I16Result r;
  r.out.assign(size_t(N), NAN);
  EXPECT_TRUE(k.gemm_i16(w.dtype, w.bytes.data(), row_bytes(w.dtype, K), N, act, 1, K, r.out.data(), N));
  const std::vector<float> wv = w.values();
  for (int64_t n = 0; n < N; ++n) {
    double want = 0, mag = 0, qerr = 0;
    for (int64_t b = 0; b < nb; ++b) {
      double amax = 0, wsum = 0, xsum = 0;
      const double m = block_min(w, n, b);
      for (int64_t kk = 32 * b; kk < 32 * b + 32; ++kk) {
        const double xv = x[size_t(kk)], wk = wv[size_t(n * K + kk)];
        want += xv * wk;
        mag += std::fabs(xv * (wk - m));
        amax = std::max(amax, std::fabs(xv));
        wsum += std::fabs(wk - m);
        xsum += xv;
      }
      mag += std::fabs(m * xsum);
      qerr += amax / 65534 * 1.02 * wsum;
    }
    r.want.push_back(want);
    r.tol.push_back(qerr + (double(nb) + 10) * kU * (mag + qerr) + 1e-30);
  }
  return r;
}

// The int8 path (CpuTuning::q8_activations) on the same inputs: its max error.
double int8_max_err(const Weight& w, const std::vector<float>& x, const std::vector<double>& want) {
  std::vector<BlockQ8_1> xq(size_t(w.cols / 32));
  cpu::quantize_q8_1(x.data(), xq.data(), w.cols);
  double e = 0;
  for (int64_t n = 0; n < w.rows; ++n) {
    const float v = cpu::vec_dot(w.dtype, w.bytes.data() + size_t(n) * row_bytes(w.dtype, w.cols), xq.data(), w.cols);
    e = std::max(e, std::fabs(v - want[size_t(n)]));
  }
  return e;
}

}  // namespace

// Odd row counts (tails of the 4- and 8-row tiles), K = 32 * odd (a block at a time; no SIMD
// width divides the block count), weights from the quantiser and from random bytes (every code,
// Q8_0's -128 included), activations with outliers (one block's amax far above the rest).
TEST(CpuInt16, GemvMatchesDoubleReference) {
  for (const auto& [isa, name] : isas_here()) {
    const cpu::Kernels& kern = cpu::kernels_for(cpu::choose_cpu_isa(isa));
    std::mt19937 rng(201);
    for (DType t : {DType::Q4_0, DType::Q4_1, DType::Q8_0})
      for (int64_t N : {1, 3, 7, 9, 13, 37})
        for (int64_t K : {32, 96, 160, 576, 1536})
          for (bool random_bytes : {false, true}) {
            Weight w = random_bytes ? Weight{t, N, K, lite_llama::testing::random_gguf_rows(t, N, K, rng)}
                                    : make_weight(rng, t, N, K);
            std::vector<float> x = randn(rng, size_t(K));
            x[size_t(K / 2)] *= 40.f;  // an outlier
            const I16Result r = run_i16(kern, w, x);
            int bad = 0;
            for (int64_t n = 0; n < N; ++n)
              if (!(std::fabs(r.out[size_t(n)] - r.want[size_t(n)]) <= r.tol[size_t(n)]) && bad++ < 3)
                ADD_FAILURE() << name << " " << dtype_name(t) << " N=" << N << " K=" << K
                              << (random_bytes ? " random bytes" : "") << " row " << n << ": "
                              << r.out[size_t(n)] << " ref " << r.want[size_t(n)] << " tol " << r.tol[size_t(n)];
            EXPECT_EQ(bad, 0);
          }
  }
}

// Fails if the int16 path loses its precision (e.g. codes quietly cut to 8 bits): on the same
// inputs its max error must be below 1/20 of the int8 path's (the step ratio is 32767 / 127 =
// 258; measured about 1/100 or better).
TEST(CpuInt16, ErrorFarBelowInt8Path) {
  for (const auto& [isa, name] : isas_here()) {
    const cpu::Kernels& kern = cpu::kernels_for(cpu::choose_cpu_isa(isa));
    std::mt19937 rng(202);
    for (DType t : {DType::Q4_0, DType::Q4_1, DType::Q8_0}) {
      const int64_t N = 64, K = 576;
      Weight w = make_weight(rng, t, N, K);
      std::vector<float> x = randn(rng, size_t(K));
      const I16Result r = run_i16(kern, w, x);
      double e16 = 0;
      for (int64_t n = 0; n < N; ++n) e16 = std::max(e16, std::fabs(r.out[size_t(n)] - r.want[size_t(n)]));
      const double e8 = int8_max_err(w, x, r.want);
      EXPECT_GT(e8, 1e-4) << name << " " << dtype_name(t);  // the int8 error is real
      EXPECT_LT(e16, e8 / 20) << name << " " << dtype_name(t) << ": int16 " << e16 << ", int8 " << e8;
      std::printf("%s %s: max error int16 %.3g, int8 %.3g (ratio %.0f)\n", name.c_str(), dtype_name(t).data(), e16, e8,
                  e8 / e16);
    }
  }
}

// Several tokens at once give each token's one-token result bit for bit (the tiles unpack a
// weight block once for several tokens but take each (row, token) through the same operations),
// so a token's output never depends on the batch it is decoded or prefilled in.
TEST(CpuInt16, TokensOfABatchEqualEachTokenAlone) {
  for (const auto& [isa, name] : isas_here()) {
    const cpu::Kernels& kern = cpu::kernels_for(cpu::choose_cpu_isa(isa));
    std::mt19937 rng(204);
    for (DType t : {DType::Q4_0, DType::Q4_1, DType::Q8_0})
      for (int64_t N : {5, 12})
        for (int T : {2, 3, 4, 5, 6, 7, 8}) {
          const int64_t K = 160, nb = K / 32;
          Weight w = make_weight(rng, t, N, K);
          std::vector<float> x = randn(rng, size_t(T * K));
          std::vector<int16_t> q(size_t(T * K));
          std::vector<float> d(size_t(T * nb)), sm(size_t(T * nb));
          std::vector<int32_t> qs(size_t(T * nb));
          for (int j = 0; j < T; ++j)
            kern.quantize_i16(x.data() + j * K, K, cpu::int16_q4_order(t),
                              cpu::ActI16{q.data() + j * K, d.data() + j * nb, sm.data() + j * nb, qs.data() + j * nb});
          const int64_t ldo = N + 3;
          std::vector<float> all(size_t(T * ldo), NAN), one(size_t(N), NAN);
          ASSERT_TRUE(kern.gemm_i16(t, w.bytes.data(), row_bytes(t, K), N, cpu::ActI16{q.data(), d.data(), sm.data(), qs.data()},
                                    T, K, all.data(), ldo));
          for (int j = 0; j < T; ++j) {
            ASSERT_TRUE(kern.gemm_i16(t, w.bytes.data(), row_bytes(t, K), N,
                                      cpu::ActI16{q.data() + j * K, d.data() + j * nb, sm.data() + j * nb, qs.data() + j * nb},
                                      1, K, one.data(), N));
            for (int64_t n = 0; n < N; ++n)
              EXPECT_EQ(std::memcmp(&all[size_t(j * ldo + n)], &one[size_t(n)], 4), 0)
                  << name << " " << dtype_name(t) << " T=" << T << " token " << j << " row " << n << ": "
                  << all[size_t(j * ldo + n)] << " vs " << one[size_t(n)];
          }
        }
  }
}

// Through the backend: linears of the int16 types take the int16 path at every T (bound as
// above, via check_linear's int8 rule with 32767 levels); other types keep fp32.
TEST(CpuInt16, BackendLinearUsesItAtEveryT) {
  for (const auto& [isa, name] : isas_here()) {
    SCOPED_TRACE(name);
    CpuTuning tune;
    tune.int16_activations = true;
    tune.isa = isa;
    auto be = cpu::make_cpu_backend(2, tune);
    EXPECT_NE(be->name().find("int16"), std::string::npos) << be->name();
    std::mt19937 rng(203);
    for (const Case& c : cases())
      for (int64_t K : {32, 96, 576})
        for (int64_t T : {1, 2, 3, 70}) check_linear(*be, rng, c, T, K, false, name, 32767);
  }
}

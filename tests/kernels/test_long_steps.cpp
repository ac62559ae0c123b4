// Steps of 65,536 and 131,072 tokens: every per-token CUDA op in one call at that size (grid
// dimensions past 65,535, row x column indices past 2^31), against the CPU backend on a sample of
// rows that includes the first and the last. Inputs are made on the device (random_weight) and
// only the sampled rows are read back, so the host never holds a whole tensor.
#include <cuda_runtime.h>

#include <set>

#include "core/gq.h"
#include "kernels/cuda_test_util.h"

using namespace lite_llama;
using namespace lite_llama::kt;

namespace {

constexpr int64_t kSteps[] = {65536, 131072};

class CudaLongStep : public CudaVsCpu {};

// The first rows, both sides of 65,536 (where grid.y stops), random ones and the last rows.
std::vector<int64_t> sample_rows(std::mt19937& rng, int64_t T) {
  std::set<int64_t> s = {0, 1, 2, T - 3, T - 2, T - 1};
  for (int64_t r : {int64_t(65535), int64_t(65536)})
    if (r < T) s.insert(r);
  std::uniform_int_distribution<int64_t> d(0, T - 1);
  while (s.size() < 24) s.insert(d(rng));
  return {s.begin(), s.end()};
}

// A device [rows, cols] tensor of the activation type, uniform in [-scale, scale).
Tensor dev_random(ops::Backend& gpu, int64_t rows, int64_t cols, uint64_t seed, float scale,
                  std::vector<Buffer>& keep) {
  return gpu.random_weight(rows, cols, seed, scale, keep, false);
}

// A device [rows, cols] tensor, all bytes 0xFF (NaN): set on the device, not uploaded.
DevTensor dev_nan(ops::Backend& gpu, DType dt, int64_t rows, int64_t cols) {
  DevTensor d = dev_alloc(gpu, dt, {rows, cols});
  gpu.synchronize();
  EXPECT_EQ(cudaMemset(d.t.data, 0xFF, d.t.nbytes()), cudaSuccess);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  return d;
}

// Rows `rows` of a device tensor, one after the other, as floats.
std::vector<float> rows_of(ops::Backend& be, const Tensor& t, const std::vector<int64_t>& rows) {
  const size_t rb = t.row_nbytes();
  std::vector<uint8_t> b(rows.size() * rb);
  for (size_t i = 0; i < rows.size(); ++i) be.copy_to_host(b.data() + i * rb, t.row(rows[i]), rb);
  return decode(b, t.dtype);
}

std::vector<int32_t> random_ids(std::mt19937& rng, int64_t n, int32_t hi) {
  std::uniform_int_distribution<int32_t> d(0, hi - 1);
  std::vector<int32_t> v(static_cast<size_t>(n));
  for (auto& x : v) x = d(rng);
  return v;
}

}  // namespace

TEST_P(CudaLongStep, Embedding) {
  // 12,288-wide rows: the output's byte offsets pass 2^31 at 131,072 tokens. Row copies: exact.
  std::mt19937 rng(601);
  const int64_t vocab = 1000, dim = 12288;
  const Tensor table = gpu->random_weight(vocab, dim, 11, 1.0f, keep, true);
  ASSERT_EQ(table.dtype, act);
  std::vector<uint8_t> host_table = to_host_bytes(*gpu, table);
  const Tensor ht(host_table.data(), act, {vocab, dim});
  for (int64_t T : kSteps) {
    SCOPED_TRACE(::testing::Message() << "T " << T);
    std::vector<int32_t> ids = random_ids(rng, T, int32_t(vocab));
    ids[size_t(T - 1)] = int32_t(vocab - 1);
    DevInts dids = dev_ints(*gpu, ids);
    DevTensor out = dev_nan(*gpu, act, T, dim);
    gpu->embedding(table, dids.ptr(), int(T), out.t);
    const std::vector<int64_t> rows = sample_rows(rng, T);
    std::vector<int32_t> sids;
    for (int64_t r : rows) sids.push_back(ids[size_t(r)]);
    const int64_t n = int64_t(rows.size());
    std::vector<float> want(size_t(n * dim), NAN);
    cpu->embedding(ht, sids.data(), int(n), host_f32(want, {n, dim}));
    ASSERT_TRUE(equal_rounded(rows_of(*gpu, out.t, rows), want, act));
  }
}

TEST_P(CudaLongStep, RmsNormAndAddRmsNorm) {
  // n = 4,096: the register path; n = 16,400: the two-pass path, 2.1e9 elements at 131,072.
  std::mt19937 rng(602);
  for (int64_t n : {int64_t(4096), int64_t(16400)})
    for (int64_t T : kSteps) {
      SCOPED_TRACE(::testing::Message() << "n " << n << " T " << T);
      std::vector<float> w = randn(rng, size_t(n));
      const Tensor dw = upload_f32(*gpu, w, {n}, keep);
      settle(*gpu);
      const Tensor x = dev_random(*gpu, T, n, 21 + uint64_t(T), 2.0f, keep);
      const Tensor res = dev_random(*gpu, T, n, 22 + uint64_t(T), 2.0f, keep);
      DevTensor out = dev_nan(*gpu, act, T, n);
      const std::vector<int64_t> rows = sample_rows(rng, T);
      const int64_t k = int64_t(rows.size());
      std::vector<float> xs = rows_of(*gpu, x, rows), rs = rows_of(*gpu, res, rows);

      gpu->rms_norm(x, dw, 1e-6f, out.t);
      std::vector<float> want(xs.size(), NAN);
      cpu->rms_norm(host_f32(xs, {k, n}), host_f32(w, {n}), 1e-6f, host_f32(want, {k, n}));
      ASSERT_TRUE(close_rows(rows_of(*gpu, out.t, rows), want, size_t(n), act_tol(act))) << "rms_norm";

      gpu->add_rms_norm(res, x, dw, 1e-6f, out.t);
      cpu->add_rms_norm(host_f32(rs, {k, n}), host_f32(xs, {k, n}), host_f32(w, {n}), 1e-6f,
                        host_f32(want, {k, n}));
      ASSERT_TRUE(equal_rounded(rows_of(*gpu, res, rows), rs, act)) << "residual";
      ASSERT_TRUE(close_rows(rows_of(*gpu, out.t, rows), want, size_t(n), act_tol(act))) << "add_rms_norm";
      keep.clear();
    }
}

TEST_P(CudaLongStep, QkvRopeStore) {
  // Qwen3-like heads (32 / 8 x 128, q/k norm); every token its own slot of a pool of T slots.
  std::mt19937 rng(603);
  const int hq = 32, hkv = 8, d = 128, rot = 128;
  const int64_t qrow = int64_t(hq) * d, kvrow = int64_t(hkv) * d, width = qrow + 2 * kvrow;
  const int64_t max_pos = 4096;
  std::vector<float> table(size_t(max_pos * rot));
  for (int64_t p = 0; p < max_pos; ++p)
    for (int i = 0; i < rot / 2; ++i) {
      const double a = double(float(p) * float(1.0 / std::pow(1000000.0, 2.0 * i / rot)));
      table[size_t(p * rot + i)] = float(std::cos(a));
      table[size_t(p * rot + rot / 2 + i)] = float(std::sin(a));
    }
  std::vector<float> qn = randn(rng, size_t(d), 0.5f), kn = randn(rng, size_t(d), 0.5f);
  for (float& v : qn) v += 1.0f;
  for (float& v : kn) v += 1.0f;
  const ops::RopeTable rope_gpu{upload_f32(*gpu, table, {max_pos, rot}, keep), rot, ops::RopeLayout::Neox};
  const Tensor qn_d = upload_f32(*gpu, qn, {d}, keep), kn_d = upload_f32(*gpu, kn, {d}, keep);
  settle(*gpu);
  for (int64_t T : kSteps) {
    SCOPED_TRACE(::testing::Message() << "T " << T);
    std::vector<Buffer> step;
    const Tensor qkv = dev_random(*gpu, T, width, 31 + uint64_t(T), 1.0f, step);
    std::vector<int32_t> pos = random_ids(rng, T, int32_t(max_pos));
    pos[size_t(T - 1)] = int32_t(max_pos - 1);
    std::vector<int32_t> slots(static_cast<size_t>(T));
    std::iota(slots.begin(), slots.end(), 0);
    std::shuffle(slots.begin(), slots.end(), rng);
    DevInts dpos = dev_ints(*gpu, pos), dslots = dev_ints(*gpu, slots);
    DevTensor dk = dev_nan(*gpu, act, T, kvrow), dv = dev_nan(*gpu, act, T, kvrow);
    DevTensor dq = dev_nan(*gpu, act, T, qrow);
    gpu->qkv_rope_store(qkv, &qn_d, &kn_d, 1e-6f, dpos.ptr(), dslots.ptr(), rope_gpu, hq, hkv, d,
                        ops::KvLayer{dk.t, dv.t}, dq.t);

    // The sampled tokens on the CPU, token i into slot i of a small pool.
    const std::vector<int64_t> rows = sample_rows(rng, T);
    const int64_t k = int64_t(rows.size());
    std::vector<float> xs = rows_of(*gpu, qkv, rows);
    std::vector<int32_t> spos, sslot, cslot;
    std::vector<int64_t> pool_rows;
    for (int64_t i = 0; i < k; ++i) {
      spos.push_back(pos[size_t(rows[size_t(i)])]);
      cslot.push_back(int32_t(i));
      pool_rows.push_back(slots[size_t(rows[size_t(i)])]);
    }
    std::vector<float> kpool(size_t(k * kvrow), NAN), vpool = kpool, q_want(size_t(k * qrow), NAN);
    std::vector<float> tab = table;
    const ops::RopeTable rope_cpu{host_f32(tab, {max_pos, rot}), rot, ops::RopeLayout::Neox};
    const Tensor qn_h = host_f32(qn, {d}), kn_h = host_f32(kn, {d});
    cpu->qkv_rope_store(host_f32(xs, {k, width}), &qn_h, &kn_h, 1e-6f, spos.data(), cslot.data(), rope_cpu, hq,
                        hkv, d, ops::KvLayer{host_f32(kpool, {k, hkv, d}), host_f32(vpool, {k, hkv, d})},
                        host_f32(q_want, {k, qrow}));
    ASSERT_TRUE(close_rows(rows_of(*gpu, dq.t, rows), q_want, size_t(d), act_tol(act), "q head"));
    ASSERT_TRUE(close_rows(rows_of(*gpu, dk.t, pool_rows), kpool, size_t(d), act_tol(act), "k head"));
    ASSERT_TRUE(equal_rounded(rows_of(*gpu, dv.t, pool_rows), vpool, act)) << "v";
  }
  keep.clear();
}

TEST_P(CudaLongStep, Swiglu) {
  // F = 14,336: gate_up holds 3.8e9 elements at 131,072 tokens. The token was blockIdx.y (at most
  // 65,535) until 65,536-token steps failed to launch. F = 100: the unvectorised path.
  std::mt19937 rng(604);
  for (int64_t F : {int64_t(14336), int64_t(100)})
    for (int64_t T : kSteps) {
      SCOPED_TRACE(::testing::Message() << "F " << F << " T " << T);
      const Tensor gu = dev_random(*gpu, T, 2 * F, 41 + uint64_t(T), 3.0f, keep);
      DevTensor out = dev_nan(*gpu, act, T, F);
      gpu->swiglu(gu, out.t);
      const std::vector<int64_t> rows = sample_rows(rng, T);
      const int64_t k = int64_t(rows.size());
      std::vector<float> gs = rows_of(*gpu, gu, rows), want(size_t(k * F), NAN);
      cpu->swiglu(host_f32(gs, {k, 2 * F}), host_f32(want, {k, F}));
      ASSERT_TRUE(close_rows(rows_of(*gpu, out.t, rows), want, size_t(F), act_tol(act), "token"));
      keep.clear();
    }
}

TEST_P(CudaLongStep, Linear) {
  // cuBLASLt with 16-bit weights: N = 19,456 (Qwen3-4B's gate|up) gives 2.5e9 outputs at
  // 131,072 tokens.
  std::mt19937 rng(605);
  const int64_t K = 2048, N = 19456;
  std::vector<float> w = randn(rng, size_t(N * K), 1.0f / std::sqrt(float(K)));
  for (float& v : w) v = round_to(DType::BF16, v);
  ops::Linear host;
  host.in_features = K, host.out_features = N;
  host.parts = {Tensor(w.data(), DType::F32, {N, K})};
  const ops::Linear gl = gpu->prepare_linear(host, keep);
  settle(*gpu);
  for (int64_t T : kSteps) {
    SCOPED_TRACE(::testing::Message() << "T " << T);
    std::vector<Buffer> step;
    const Tensor x = dev_random(*gpu, T, K, 51 + uint64_t(T), 1.0f, step);
    DevTensor out = dev_nan(*gpu, act, T, N);
    gpu->linear(x, gl, out.t);
    const std::vector<int64_t> rows = sample_rows(rng, T);
    const int64_t k = int64_t(rows.size());
    std::vector<float> xs = rows_of(*gpu, x, rows), want(size_t(k * N), NAN);
    cpu->linear(host_f32(xs, {k, K}), host, host_f32(want, {k, N}));
    ASSERT_TRUE(close_rows(rows_of(*gpu, out.t, rows), want, size_t(N), act_tol(act), "token"));
  }
  keep.clear();
}

TEST_P(CudaLongStep, LinearQuantised) {
  // Long prefills of GQ weights: int8 through dequantised tiles + cuBLASLt into column blocks of
  // the output, fp8 through W8A8 (sm_89+) in chunks of tokens. Reference: the CPU with the
  // dequantised weights (test_gq.cpp's scheme and tolerances).
  std::mt19937 rng(606);
  const int64_t K = 2048, N = 4096;
  int dev = 0, major = 0, minor = 0;
  cudaGetDevice(&dev);
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
  cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev);
  for (DType t : {DType::GQ8, DType::GF8}) {
    SCOPED_TRACE(dtype_name(t));
    std::vector<float> v = randn(rng, size_t(N * K), 1.0f / std::sqrt(float(K)));
    const size_t rb = row_bytes(t, K);
    std::vector<uint8_t> bytes(rb * size_t(N));
    for (int64_t r = 0; r < N; ++r) quantize_row(t, v.data() + r * K, bytes.data() + size_t(r) * rb, K);
    std::vector<float> ref(size_t(N * K));
    for (int64_t r = 0; r < N; ++r) dequantize_row(t, bytes.data() + size_t(r) * rb, ref.data() + r * K, K);
    ops::Linear host;
    host.in_features = K, host.out_features = N;
    host.parts = {Tensor(bytes.data(), t, {N, K})};
    const ops::Linear gl = gpu->prepare_linear(host, keep);
    settle(*gpu);
    ASSERT_EQ(gl.parts[0].dtype, t);
    ops::Linear cl = host;
    cl.parts = {Tensor(ref.data(), DType::F32, {N, K})};
    const Tol tol = t == DType::GF8 && major * 10 + minor >= 89 ? Tol{5e-2, 1.5e-1} : act_tol(act);
    for (int64_t T : kSteps) {
      SCOPED_TRACE(::testing::Message() << "T " << T);
      std::vector<Buffer> step;
      const Tensor x = dev_random(*gpu, T, K, 61 + uint64_t(T), 1.0f, step);
      DevTensor out = dev_nan(*gpu, act, T, N);
      gpu->linear(x, gl, out.t);
      const std::vector<int64_t> rows = sample_rows(rng, T);
      const int64_t k = int64_t(rows.size());
      std::vector<float> xs = rows_of(*gpu, x, rows), want(size_t(k * N), NAN);
      cpu->linear(host_f32(xs, {k, K}), cl, host_f32(want, {k, N}));
      ASSERT_TRUE(close_rows(rows_of(*gpu, out.t, rows), want, size_t(N), tol, "token"));
    }
    keep.clear();
  }
}

TEST_P(CudaLongStep, GatherRows) {
  // The logit rows of a step (the final norm's input): any of T rows of 8,192. Exact.
  std::mt19937 rng(607);
  const int64_t H = 8192;
  for (int64_t T : kSteps) {
    SCOPED_TRACE(::testing::Message() << "T " << T);
    const Tensor x = dev_random(*gpu, T, H, 71 + uint64_t(T), 1.0f, keep);
    const std::vector<int64_t> rows = sample_rows(rng, T);
    const int64_t k = int64_t(rows.size());
    std::vector<int32_t> idx(rows.rbegin(), rows.rend());  // reversed: T - 1 first
    DevInts didx = dev_ints(*gpu, idx);
    DevTensor out = dev_nan(*gpu, act, k, H);
    gpu->gather_rows(x, didx.ptr(), int(k), out.t);
    // The rows read back one by one are the reference.
    const std::vector<float> want = rows_of(*gpu, x, std::vector<int64_t>(idx.begin(), idx.end()));
    ASSERT_TRUE(equal_rounded(to_host(*gpu, out.t), want, act));
    keep.clear();
  }
}

TEST_P(CudaLongStep, WriteSlotTable) {
  // Every (request, position) cell of 32 (or 16) rows of 4,096 positions written in one call.
  std::mt19937 rng(608);
  for (int64_t T : kSteps) {
    SCOPED_TRACE(::testing::Message() << "T " << T);
    const int stride = 4096;
    const std::vector<int32_t> cells = distinct(rng, int(T), int(T));
    std::vector<int32_t> req, pos, slots = random_ids(rng, T, 1 << 30);
    for (int32_t c : cells) req.push_back(c / stride), pos.push_back(c % stride);
    std::vector<int32_t> table(size_t(T), -7);
    DevInts dt = dev_ints(*gpu, table), dreq = dev_ints(*gpu, req), dpos = dev_ints(*gpu, pos),
            dslots = dev_ints(*gpu, slots);
    gpu->write_slot_table(dt.ptr(), stride, dreq.ptr(), dpos.ptr(), dslots.ptr(), int(T));
    cpu->write_slot_table(table.data(), stride, req.data(), pos.data(), slots.data(), int(T));
    ASSERT_EQ(ints_to_host(*gpu, dt.ptr(), table.size()), table);
  }
}

TEST_P(CudaLongStep, LogitsAndArgmaxAtMaxSeqs) {
  // The LM head and greedy pick at the most rows a step has (--max-num-seqs 4,096) and a
  // 151,936-entry vocabulary: 6.2e8 F32 logits.
  std::mt19937 rng(609);
  const int64_t B = 4096, V = 151936, K = 256;
  const int limit = int(V) - 37;
  std::vector<float> w = randn(rng, size_t(V * K), 1.0f / std::sqrt(float(K)));
  for (float& v : w) v = round_to(DType::BF16, v);
  ops::Linear host;
  host.in_features = K, host.out_features = V;
  host.parts = {Tensor(w.data(), DType::F32, {V, K})};
  const ops::Linear gl = gpu->prepare_linear(host, keep);
  settle(*gpu);
  const Tensor x = dev_random(*gpu, B, K, 81, 1.0f, keep);
  DevTensor logits = dev_nan(*gpu, DType::F32, B, V);
  gpu->linear(x, gl, logits.t);
  DevInts out = dev_ints(*gpu, std::vector<int32_t>(size_t(B), -5));
  gpu->argmax(logits.t, int(B), limit, out.ptr());
  const std::vector<int32_t> got = ints_to_host(*gpu, out.ptr(), size_t(B));
  const std::vector<int64_t> rows = sample_rows(rng, B);
  const int64_t k = int64_t(rows.size());
  std::vector<float> ls = rows_of(*gpu, logits.t, rows), xs = rows_of(*gpu, x, rows);
  std::vector<float> want(size_t(k * V), NAN);
  cpu->linear(host_f32(xs, {k, K}), host, host_f32(want, {k, V}));
  ASSERT_TRUE(close_rows(ls, want, size_t(V), f32_tol(), "row"));
  std::vector<int32_t> best(size_t(k), -1);
  cpu->argmax(host_f32(ls, {k, V}), int(k), limit, best.data());  // on the device's logits
  for (int64_t i = 0; i < k; ++i) EXPECT_EQ(got[size_t(rows[size_t(i)])], best[size_t(i)]) << "row " << rows[size_t(i)];
  keep.clear();
}

LL_INSTANTIATE_DTYPES(CudaLongStep);

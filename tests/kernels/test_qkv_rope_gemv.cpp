// linear_rope_store: the one-token QKV GEMV that rotates q / k and stores q, K and V itself must
// store exactly what linear then qkv_rope_store store (the products rounded to act, the same
// rotation), and match the CPU (linear, rounded to act, then its RoPE) within the 16-bit
// tolerance. Shapes that do not fit (two tokens, partial rotary, K % 64 != 0), the option off
// and one GPU by default run nothing.
#include "kernels/cuda_test_util.h"

using namespace lite_llama;
using namespace lite_llama::kt;

namespace {

class CudaQkvRopeGemv : public CudaVsCpu {};

constexpr int64_t kMaxPos = 4096;
constexpr int64_t kSlots = 64;
constexpr float kSentinel = 1024.0f;  // exact in bf16 and fp16

struct Shape {
  int hq, hkv, d;
  int64_t k;
};

// The QKV projection as the loader hands it over (q, k, v row blocks of F32 values rounded to
// bf16, an optional F32 bias), prepared on both backends.
struct Qkv {
  std::vector<std::vector<float>> rows;
  std::vector<float> bias;
  ops::Linear cpu_lin, gpu_lin;
};

void build_qkv(Qkv& w, ops::Backend& gpu, ops::Backend& cpu, std::vector<Buffer>& keep, std::mt19937& rng,
               const Shape& s, bool bias, DType act) {
  ops::Linear host;
  host.in_features = s.k;
  host.out_features = int64_t(s.hq + 2 * s.hkv) * s.d;
  for (int heads : {s.hq, s.hkv, s.hkv}) {
    std::vector<float> v = randn(rng, size_t(heads * s.d * s.k), 1.0f / std::sqrt(float(s.k)));
    for (float& x : v) x = round_to(DType::BF16, x);
    w.rows.push_back(std::move(v));
    host.parts.push_back(host_f32(w.rows.back(), {int64_t(heads) * s.d, s.k}));
  }
  ops::Linear for_gpu = host;
  if (bias) {
    w.bias = rand_act(rng, size_t(host.out_features), act, 0.5f);
    host.bias = host_f32(w.bias, {host.out_features});
    for_gpu.bias = upload_f32(gpu, w.bias, {host.out_features}, keep);
    settle(gpu);
  }
  w.cpu_lin = cpu.prepare_linear(host, keep);
  w.gpu_lin = gpu.prepare_linear(for_gpu, keep);
  settle(gpu);
}

struct Outputs {
  std::vector<float> q, k, v;
};

}  // namespace

TEST_P(CudaQkvRopeGemv, EqualsLinearThenRopeStore) {
  // On by default only with tensor parallelism: `gpu` (one GPU, the default) runs nothing.
  CudaTuning on, loop, ordered, off;
  on.qkv_rope_gemv = loop.qkv_rope_gemv = ordered.qkv_rope_gemv = 1;
  loop.gemv1_loop_blocks_per_sm = 1;
  ordered.gemv1_ordered_prefetch = 1;
  off.qkv_rope_gemv = 0;
  std::unique_ptr<ops::Backend> g_on = make_gpu(GetParam(), on), g_off = make_gpu(GetParam(), off);
  std::unique_ptr<ops::Backend> g_loop = make_gpu(GetParam(), loop), g_ordered = make_gpu(GetParam(), ordered);
  std::mt19937 rng(307);
  const Shape shapes[] = {{4, 4, 64, 64}, {9, 3, 64, 576}, {8, 2, 128, 2048}, {16, 4, 128, 4096}, {24, 8, 128, 3072}};
  int idx = 0;
  for (const Shape& s : shapes)
    for (auto layout : {ops::RopeLayout::Neox, ops::RopeLayout::Interleaved}) {
      const bool bias = idx++ % 2 == 0;
      SCOPED_TRACE(::testing::Message() << "Hq " << s.hq << " Hkv " << s.hkv << " D " << s.d << " K " << s.k
                                        << (layout == ops::RopeLayout::Neox ? " neox" : " interleaved")
                                        << " bias " << bias);
      Qkv w;
      build_qkv(w, *gpu, *cpu, keep, rng, s, bias, act);
      const int64_t qrow = int64_t(s.hq) * s.d, kvrow = int64_t(s.hkv) * s.d, width = qrow + 2 * kvrow;
      std::vector<float> table = rope_table(s.d, kMaxPos, 500000.0);
      std::vector<float> x = rand_act(rng, size_t(s.k), act);
      std::vector<int32_t> pos = {std::uniform_int_distribution<int32_t>(1, int32_t(kMaxPos) - 1)(rng)};
      std::vector<int32_t> slot = {std::uniform_int_distribution<int32_t>(0, int32_t(kSlots) - 1)(rng)};

      // CPU: the projection rounded to act (what the device stores), then its RoPE + KV write.
      std::vector<float> qkv_h(static_cast<size_t>(width)), q_want(static_cast<size_t>(qrow), NAN);
      std::vector<float> kpool(size_t(kSlots * kvrow), kSentinel), vpool = kpool;
      cpu->linear(host_f32(x, {1, s.k}), w.cpu_lin, host_f32(qkv_h, {1, width}));
      for (float& v : qkv_h) v = round_to(act, v);
      const ops::RopeTable rope_cpu{host_f32(table, {kMaxPos, s.d}), s.d, layout};
      cpu->qkv_rope_store(host_f32(qkv_h, {1, width}), nullptr, nullptr, 1e-6f, pos.data(), slot.data(), rope_cpu,
                          s.hq, s.hkv, s.d,
                          ops::KvLayer{host_f32(kpool, {kSlots, s.hkv, s.d}), host_f32(vpool, {kSlots, s.hkv, s.d})},
                          host_f32(q_want, {1, qrow}));

      DevTensor dx = dev_from(*gpu, x, act, {1, s.k});
      DevInts dpos = dev_ints(*gpu, pos), dslot = dev_ints(*gpu, slot);
      const ops::RopeTable rope{upload_f32(*gpu, table, {kMaxPos, s.d}, keep), s.d, layout};
      settle(*gpu);
      const std::vector<float> sentinel(size_t(kSlots * kvrow), kSentinel);
      // Runs `fused` (linear_rope_store of backend `be`, which must run it) or linear then
      // qkv_rope_store on the test's backend, into fresh pools.
      auto run = [&](ops::Backend* be, bool fused) {
        DevTensor dq = dev_alloc(*gpu, act, {1, qrow});
        DevTensor dk = dev_from(*gpu, sentinel, act, {kSlots, s.hkv, s.d});
        DevTensor dv = dev_from(*gpu, sentinel, act, {kSlots, s.hkv, s.d});
        poison(*gpu, dq.t);
        const ops::KvLayer kv{dk.t, dv.t};
        if (fused) {
          settle(*gpu);  // the pools and q were filled on the test backend's stream
          EXPECT_TRUE(be->linear_rope_store(dx.t, w.gpu_lin, dpos.ptr(), dslot.ptr(), rope, s.hq, s.hkv, s.d, kv, dq.t));
          settle(*be);
        } else {
          DevTensor qkv = dev_alloc(*gpu, act, {1, width});
          gpu->linear(dx.t, w.gpu_lin, qkv.t);
          gpu->qkv_rope_store(qkv.t, nullptr, nullptr, 1e-6f, dpos.ptr(), dslot.ptr(), rope, s.hq, s.hkv, s.d, kv,
                              dq.t);
        }
        return Outputs{to_host(*gpu, dq.t), to_host(*gpu, dk.t), to_host(*gpu, dv.t)};
      };
      const Outputs apart = run(nullptr, false), fused = run(g_on.get(), true);
      EXPECT_EQ(fused.q, apart.q);
      EXPECT_EQ(fused.k, apart.k);
      EXPECT_EQ(fused.v, apart.v);
      for (ops::Backend* be : {g_loop.get(), g_ordered.get()}) {
        const Outputs o = run(be, true);
        EXPECT_EQ(o.q, fused.q);
        EXPECT_EQ(o.k, fused.k);
        EXPECT_EQ(o.v, fused.v);
      }
      EXPECT_TRUE(close_rows(fused.q, q_want, size_t(s.d), act_tol(act), "q head"));
      // Only the token's slot is written; the rest keeps the sentinel (the CPU pools do too).
      EXPECT_TRUE(close_rows(fused.k, kpool, size_t(s.d), act_tol(act), "k head"));
      // V is the product as the device rounds it: its fp32 sums differ from the CPU's in order.
      EXPECT_TRUE(close_rows(fused.v, vpool, size_t(s.d), act_tol(act), "v head"));

      // Not this kernel's: two tokens, partial rotary, the option off.
      DevTensor dx2 = dev_from(*gpu, rand_act(rng, size_t(2 * s.k), act), act, {2, s.k});
      DevTensor dq2 = dev_alloc(*gpu, act, {2, qrow});
      DevTensor dk = dev_alloc(*gpu, act, {kSlots, s.hkv, s.d}), dv = dev_alloc(*gpu, act, {kSlots, s.hkv, s.d});
      const ops::KvLayer kv{dk.t, dv.t};
      const ops::RopeTable partial{rope.cos_sin, s.d / 2, layout};
      DevTensor dq = dev_alloc(*gpu, act, {1, qrow});
      EXPECT_FALSE(gpu->linear_rope_store(dx.t, w.gpu_lin, dpos.ptr(), dslot.ptr(), rope, s.hq, s.hkv, s.d, kv, dq.t));
      EXPECT_FALSE(g_on->linear_rope_store(dx2.t, w.gpu_lin, dpos.ptr(), dslot.ptr(), rope, s.hq, s.hkv, s.d, kv, dq2.t));
      EXPECT_FALSE(g_on->linear_rope_store(dx.t, w.gpu_lin, dpos.ptr(), dslot.ptr(), partial, s.hq, s.hkv, s.d, kv, dq.t));
      EXPECT_FALSE(g_off->linear_rope_store(dx.t, w.gpu_lin, dpos.ptr(), dslot.ptr(), rope, s.hq, s.hkv, s.d, kv, dq.t));
      if (HasFailure()) return;
      keep.clear();
    }
}

TEST_P(CudaQkvRopeGemv, KNotAMultipleOf64RunsNothing) {
  CudaTuning on;
  on.qkv_rope_gemv = 1;
  std::unique_ptr<ops::Backend> g_on = make_gpu(GetParam(), on);
  std::mt19937 rng(308);
  const Shape s{4, 2, 64, 96};
  Qkv w;
  build_qkv(w, *gpu, *cpu, keep, rng, s, false, act);
  std::vector<float> table = rope_table(s.d, 16, 10000.0);
  const ops::RopeTable rope{upload_f32(*gpu, table, {16, s.d}, keep), s.d, ops::RopeLayout::Neox};
  DevInts dpos = dev_ints(*gpu, {3}), dslot = dev_ints(*gpu, {1});
  DevTensor dx = dev_from(*gpu, rand_act(rng, size_t(s.k), act), act, {1, s.k});
  DevTensor dq = dev_alloc(*gpu, act, {1, int64_t(s.hq) * s.d});
  DevTensor dk = dev_alloc(*gpu, act, {kSlots, s.hkv, s.d}), dv = dev_alloc(*gpu, act, {kSlots, s.hkv, s.d});
  EXPECT_FALSE(g_on->linear_rope_store(dx.t, w.gpu_lin, dpos.ptr(), dslot.ptr(), rope, s.hq, s.hkv, s.d,
                                       ops::KvLayer{dk.t, dv.t}, dq.t));
}

LL_INSTANTIATE_DTYPES(CudaQkvRopeGemv);

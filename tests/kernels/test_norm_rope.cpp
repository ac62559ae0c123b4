// CUDA rms_norm, add_rms_norm and qkv_rope_store against the CPU backend.
#include "kernels/cuda_test_util.h"

using namespace lite_llama;
using namespace lite_llama::kt;

namespace {

class CudaNorm : public CudaVsCpu {};
class CudaRope : public CudaVsCpu {};

// Row widths: the register path (n % 8 == 0, n <= 8192) at model sizes, and the generic
// two-pass path (n = 100: not a multiple of 8; n = 8200: past 8192).
constexpr int64_t kWidths[] = {64, 576, 2048, 2560, 3072, 8192, 100, 8200};
constexpr int64_t kRows[] = {1, 3, 64, 600};  // 600: past the kernel's early-load variant (<= 512 rows)

}  // namespace

TEST_P(CudaNorm, RmsNorm) {
  // fp32 statistics on both sides; the device rounds the output once (<= u relative).
  std::mt19937 rng(201);
  for (int64_t n : kWidths)
    for (int64_t rows : kRows) {
      SCOPED_TRACE(::testing::Message() << "n " << n << " rows " << rows);
      const float eps = rows == 3 ? 1e-5f : 1e-6f;
      std::vector<float> x = rand_act(rng, size_t(rows * n), act, 3.0f);
      std::vector<float> w = randn(rng, size_t(n));
      std::vector<float> want(x.size(), NAN);
      cpu->rms_norm(host_f32(x, {rows, n}), host_f32(w, {n}), eps, host_f32(want, {rows, n}));

      Tensor dw = upload_f32(*gpu, w, {n}, keep);
      settle(*gpu);
      DevTensor dx = dev_from(*gpu, x, act, {rows, n});
      DevTensor out = dev_alloc(*gpu, act, {rows, n});
      poison(*gpu, out.t);
      gpu->rms_norm(dx.t, dw, eps, out.t);
      ASSERT_TRUE(close_rows(to_host(*gpu, out.t), want, size_t(n), act_tol(act)));
      // The input is left alone.
      ASSERT_TRUE(equal_rounded(to_host(*gpu, dx.t), x, act));
      keep.clear();
    }
}

TEST_P(CudaNorm, AddRmsNormUpdatesResidual) {
  // residual + x is one fp32 addition on both sides; the device then rounds it to act (round to
  // nearest even, as f32_to_bf16 / f32_to_f16 do), so the updated residual must equal the
  // CPU's fp32 sum rounded: checked bit for bit. The statistics then come from the rounded
  // residual on the device (<= u relative per element) and the output is rounded once more:
  // two roundings, within act_tol.
  std::mt19937 rng(202);
  for (int64_t n : kWidths)
    for (int64_t rows : kRows) {
      SCOPED_TRACE(::testing::Message() << "n " << n << " rows " << rows);
      std::vector<float> res = rand_act(rng, size_t(rows * n), act, 2.0f);
      std::vector<float> x = rand_act(rng, size_t(rows * n), act, 1.0f);
      std::vector<float> w = randn(rng, size_t(n));
      std::vector<float> res_cpu = res, want(x.size(), NAN);
      cpu->add_rms_norm(host_f32(res_cpu, {rows, n}), host_f32(x, {rows, n}), host_f32(w, {n}),
                        1e-6f, host_f32(want, {rows, n}));

      Tensor dw = upload_f32(*gpu, w, {n}, keep);
      settle(*gpu);
      DevTensor dres = dev_from(*gpu, res, act, {rows, n});
      DevTensor dx = dev_from(*gpu, x, act, {rows, n});
      DevTensor out = dev_alloc(*gpu, act, {rows, n});
      poison(*gpu, out.t);
      gpu->add_rms_norm(dres.t, dx.t, dw, 1e-6f, out.t);
      ASSERT_TRUE(equal_rounded(to_host(*gpu, dres.t), res_cpu, act)) << "residual";
      ASSERT_TRUE(close_rows(to_host(*gpu, out.t), want, size_t(n), act_tol(act))) << "output";
      ASSERT_TRUE(equal_rounded(to_host(*gpu, dx.t), x, act)) << "x must be left alone";
      keep.clear();
    }
}

TEST_P(CudaNorm, Fp32ResidualStream) {
  // The fp32 residual stream: rms_norm reads fp32 x, add_rms_norm keeps an fp32 residual and adds
  // a 16-bit or an fp32 x (the projections' outputs). The residual update is one fp32 addition on
  // both sides (bit for bit); the output rounds once.
  std::mt19937 rng(203);
  for (DType xt : {act, DType::F32})
  for (int64_t n : kWidths)
    for (int64_t rows : kRows) {
      SCOPED_TRACE(::testing::Message() << "x " << dtype_name(xt) << " n " << n << " rows " << rows);
      std::vector<float> res = randn(rng, size_t(rows * n), 2.0f);  // not rounded to act
      std::vector<float> x = xt == act ? rand_act(rng, size_t(rows * n), act, 1.0f) : randn(rng, size_t(rows * n));
      std::vector<float> w = randn(rng, size_t(n));
      std::vector<float> want0(x.size(), NAN), res_cpu = res, want(x.size(), NAN);
      cpu->rms_norm(host_f32(res, {rows, n}), host_f32(w, {n}), 1e-6f, host_f32(want0, {rows, n}));
      cpu->add_rms_norm(host_f32(res_cpu, {rows, n}), host_f32(x, {rows, n}), host_f32(w, {n}),
                        1e-6f, host_f32(want, {rows, n}));

      Tensor dw = upload_f32(*gpu, w, {n}, keep);
      settle(*gpu);
      DevTensor dres = dev_from(*gpu, res, DType::F32, {rows, n});
      DevTensor dx = dev_from(*gpu, x, xt, {rows, n});
      DevTensor out = dev_alloc(*gpu, act, {rows, n});
      poison(*gpu, out.t);
      gpu->rms_norm(dres.t, dw, 1e-6f, out.t);
      ASSERT_TRUE(close_rows(to_host(*gpu, out.t), want0, size_t(n), act_tol(act))) << "rms_norm";
      poison(*gpu, out.t);
      gpu->add_rms_norm(dres.t, dx.t, dw, 1e-6f, out.t);
      ASSERT_TRUE(equal_rounded(to_host(*gpu, dres.t), res_cpu, DType::F32)) << "residual";
      ASSERT_TRUE(close_rows(to_host(*gpu, out.t), want, size_t(n), act_tol(act))) << "output";
      keep.clear();
    }
}

namespace {

struct RopeCase {
  int hq, hkv, d, rot;
  ops::RopeLayout layout;
  bool qk_norm;
};

constexpr int64_t kMaxPos = 4096;
constexpr int64_t kSlots = 1024;
constexpr float kSentinel = 1024.0f;  // exact in bf16 and fp16

// Tolerance: the device rounds q/k once after the rotation, and with q/k norm twice more
// (after the normalisation and after the weight product, as the model computes in its own
// dtype): <= 3u relative to the head's scale, inside act_tol's max bound; rel-L2 ~ 2u/sqrt(3).
// Checked per head, so a wrong head offset or a head left unrotated cannot hide.
void check_rope(ops::Backend& gpu, ops::Backend& cpu, std::vector<Buffer>& keep, std::mt19937& rng,
                const RopeCase& c, int64_t T, const std::vector<float>& table, DType act) {
  const int64_t qrow = int64_t(c.hq) * c.d, kvrow = int64_t(c.hkv) * c.d;
  const int64_t width = qrow + 2 * kvrow;
  std::vector<float> qkv = rand_act(rng, size_t(T * width), act);
  std::vector<float> qn = randn(rng, size_t(c.d), 0.5f), kn = randn(rng, size_t(c.d), 0.5f);
  for (float& v : qn) v += 1.0f;
  for (float& v : kn) v += 1.0f;
  std::uniform_int_distribution<int32_t> pd(0, 4000);
  std::vector<int32_t> pos(static_cast<size_t>(T));
  for (auto& p : pos) p = pd(rng);
  pos[0] = 4000;
  if (T > 1) pos[1] = 0;
  const std::vector<int32_t> slots = distinct(rng, int(kSlots), int(T));

  // CPU reference.
  std::vector<float> kpool(size_t(kSlots * kvrow), kSentinel), vpool = kpool;
  std::vector<float> q_want(size_t(T * qrow), NAN);
  std::vector<float> tab = table;
  ops::RopeTable rope_cpu{host_f32(tab, {kMaxPos, c.rot}), c.rot, c.layout};
  Tensor qn_h = host_f32(qn, {c.d}), kn_h = host_f32(kn, {c.d});
  cpu.qkv_rope_store(host_f32(qkv, {T, width}), c.qk_norm ? &qn_h : nullptr,
                     c.qk_norm ? &kn_h : nullptr, 1e-6f, pos.data(), slots.data(), rope_cpu, c.hq,
                     c.hkv, c.d,
                     ops::KvLayer{host_f32(kpool, {kSlots, c.hkv, c.d}),
                                  host_f32(vpool, {kSlots, c.hkv, c.d})},
                     host_f32(q_want, {T, qrow}));

  // Device.
  ops::RopeTable rope_gpu{upload_f32(gpu, tab, {kMaxPos, c.rot}, keep), c.rot, c.layout};
  Tensor qn_d = upload_f32(gpu, qn, {c.d}, keep), kn_d = upload_f32(gpu, kn, {c.d}, keep);
  settle(gpu);
  const std::vector<float> sentinel_pool(size_t(kSlots * kvrow), kSentinel);
  DevTensor dk = dev_from(gpu, sentinel_pool, act, {kSlots, c.hkv, c.d});
  DevTensor dv = dev_from(gpu, sentinel_pool, act, {kSlots, c.hkv, c.d});
  DevTensor dqkv = dev_from(gpu, qkv, act, {T, width});
  DevTensor dq = dev_alloc(gpu, act, {T, qrow});
  poison(gpu, dq.t);
  DevInts dpos = dev_ints(gpu, pos), dslots = dev_ints(gpu, slots);
  gpu.qkv_rope_store(dqkv.t, c.qk_norm ? &qn_d : nullptr, c.qk_norm ? &kn_d : nullptr, 1e-6f,
                     dpos.ptr(), dslots.ptr(), rope_gpu, c.hq, c.hkv, c.d, ops::KvLayer{dk.t, dv.t},
                     dq.t);

  ASSERT_TRUE(close_rows(to_host(gpu, dq.t), q_want, size_t(c.d), act_tol(act), "q head"));
  const std::vector<float> gk = to_host(gpu, dk.t), gv = to_host(gpu, dv.t);
  std::vector<bool> written(static_cast<size_t>(kSlots), false);
  for (int64_t t = 0; t < T; ++t) {
    const size_t s = size_t(slots[size_t(t)]);
    written[s] = true;
    const std::vector<float> k_got(gk.begin() + long(s * kvrow), gk.begin() + long((s + 1) * kvrow));
    const std::vector<float> k_want(kpool.begin() + long(s * kvrow), kpool.begin() + long((s + 1) * kvrow));
    ASSERT_TRUE(close_rows(k_got, k_want, size_t(c.d), act_tol(act), "k head"))
        << "token " << t << " slot " << s << " position " << pos[size_t(t)];
    // V is stored as given: bit for bit.
    const std::vector<float> v_got(gv.begin() + long(s * kvrow), gv.begin() + long((s + 1) * kvrow));
    const std::vector<float> v_want(vpool.begin() + long(s * kvrow), vpool.begin() + long((s + 1) * kvrow));
    ASSERT_TRUE(equal_rounded(v_got, v_want, act)) << "v of token " << t << " slot " << s;
  }
  for (int64_t s = 0; s < kSlots; ++s) {
    if (written[size_t(s)]) continue;
    for (int64_t i = 0; i < kvrow; ++i) {
      ASSERT_EQ(gk[size_t(s * kvrow + i)], kSentinel) << "k slot " << s << " overwritten";
      ASSERT_EQ(gv[size_t(s * kvrow + i)], kSentinel) << "v slot " << s << " overwritten";
    }
  }
  keep.clear();
}

}  // namespace

TEST_P(CudaRope, QkvRopeStoreAllShapes) {
  std::mt19937 rng(203);
  const int heads[][2] = {{4, 4}, {8, 2}, {9, 3}, {16, 2}, {32, 8}, {24, 8}};
  for (int d : {64, 128}) {
    const std::vector<float> table = rope_table(d, kMaxPos, d == 64 ? 10000.0 : 1000000.0);
    for (auto layout : {ops::RopeLayout::Neox, ops::RopeLayout::Interleaved})
      for (bool norm : {false, true})
        for (const auto& h : heads)
          for (int64_t T : {1, 7, 33}) {
            SCOPED_TRACE(::testing::Message()
                         << (layout == ops::RopeLayout::Neox ? "neox" : "interleaved")
                         << (norm ? " qk_norm" : "") << " Hq " << h[0] << " Hkv " << h[1] << " D "
                         << d << " T " << T);
            check_rope(*gpu, *cpu, keep, rng, {h[0], h[1], d, d, layout, norm}, T, table, act);
            if (HasFatalFailure()) return;
          }
  }
}

TEST_P(CudaRope, PartialRotary) {
  // rot_dim < head_dim: the tail of each q/k head is copied unrotated.
  std::mt19937 rng(204);
  const std::vector<float> table = rope_table(32, kMaxPos, 10000.0);
  for (auto layout : {ops::RopeLayout::Neox, ops::RopeLayout::Interleaved})
    for (bool norm : {false, true})
      for (int d : {64, 128}) {
        SCOPED_TRACE(::testing::Message() << "layout " << int(layout) << " norm " << norm << " D " << d);
        check_rope(*gpu, *cpu, keep, rng, {8, 2, d, 32, layout, norm}, 7, table, act);
        if (HasFatalFailure()) return;
      }
}

TEST_P(CudaRope, StepsOnBothSidesOfTheEarlyLoadVariant) {
  // Steps of up to 512 tokens load cos/sin and the q/k norm weights before the PDL wait, larger
  // ones after it: the same results on both sides of the boundary.
  std::mt19937 rng(205);
  for (int d : {64, 128}) {
    const std::vector<float> table = rope_table(d, kMaxPos, 1000000.0);
    for (auto layout : {ops::RopeLayout::Neox, ops::RopeLayout::Interleaved})
      for (bool norm : {false, true})
        for (int64_t T : {512, 513, 700}) {
          SCOPED_TRACE(::testing::Message() << "layout " << int(layout) << " norm " << norm << " D " << d << " T " << T);
          check_rope(*gpu, *cpu, keep, rng, {16, 2, d, d, layout, norm}, T, table, act);
          if (HasFatalFailure()) return;
        }
  }
}

LL_INSTANTIATE_DTYPES(CudaNorm);
LL_INSTANTIATE_DTYPES(CudaRope);

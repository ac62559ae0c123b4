// Every CpuBackend op other than linear (test_cpu_linear.cpp) against cpu::ref or a direct
// evaluation of its definition, over many shapes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "backend_test_util.h"
#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/cpu_isa.h"
#include "backends/cpu/ref_ops.h"
#include "core/half.h"

using namespace lite_llama;
using namespace lite_llama::test;
namespace ref = lite_llama::cpu::ref;

namespace {

std::unique_ptr<ops::Backend> backend() { return cpu::make_cpu_backend(2); }

// One backend per kernel set this CPU runs (the attention tiles differ per set).
std::vector<std::unique_ptr<ops::Backend>> backends_per_isa() {
  std::vector<CpuIsaChoice> isas = {CpuIsaChoice::Generic};
  const cpu::CpuIsa best = cpu::detect_cpu_isa();
  if (best != cpu::CpuIsa::Generic) isas.push_back(CpuIsaChoice::Avx2);
  if (best == cpu::CpuIsa::Avx512) isas.push_back(CpuIsaChoice::Avx512);
  std::vector<std::unique_ptr<ops::Backend>> v;
  for (CpuIsaChoice isa : isas) {
    CpuTuning t;
    t.isa = isa;
    v.push_back(cpu::make_cpu_backend(2, t));
  }
  return v;
}

Tensor f32(std::vector<float>& v, std::initializer_list<int64_t> dims) {
  return Tensor(v.data(), DType::F32, dims);
}

// The backend sums squares in fp32 along one chain of n additions (the reference in double):
// relative error of the mean square <= (n + 1) u, of 1/sqrt <= ((n + 1) / 2 + 2) u, and one
// more rounding per product with x and w.
double norm_rel_tol(int64_t n) { return (double(n + 1) / 2 + 5) * kU; }

}  // namespace

TEST(CpuBackend, RmsNorm) {
  auto be = backend();
  std::mt19937 rng(1);
  for (int64_t n : {1, 7, 64, 576, 2048})
    for (int64_t rows : {1, 3, 17}) {
      auto x = randn(rng, size_t(rows * n), 3.0f), w = randn(rng, size_t(n));
      std::vector<float> out(x.size(), NAN), want(x.size());
      be->rms_norm(f32(x, {rows, n}), f32(w, {n}), 1e-6f, f32(out, {rows, n}));
      ref::rms_norm(x.data(), w.data(), 1e-6f, rows, n, want.data());
      for (size_t i = 0; i < x.size(); ++i)
        ASSERT_NEAR(out[i], want[i], norm_rel_tol(n) * std::fabs(want[i]) + 1e-30)
            << "n=" << n << " rows=" << rows << " i=" << i;
    }
}

TEST(CpuBackend, AddRmsNorm) {
  auto be = backend();
  std::mt19937 rng(2);
  for (int64_t n : {1, 7, 64, 576, 2048})
    for (int64_t rows : {1, 3, 17}) {
      auto res = randn(rng, size_t(rows * n)), x = randn(rng, size_t(rows * n)),
           w = randn(rng, size_t(n));
      auto res_ref = res;
      std::vector<float> out(x.size(), NAN), want(x.size());
      be->add_rms_norm(f32(res, {rows, n}), f32(x, {rows, n}), f32(w, {n}), 1e-5f,
                       f32(out, {rows, n}));
      ref::add_rms_norm(res_ref.data(), x.data(), w.data(), 1e-5f, rows, n, want.data());
      // residual + x is one fp32 addition on both sides: identical.
      ASSERT_EQ(res, res_ref) << "n=" << n;
      for (size_t i = 0; i < x.size(); ++i)
        ASSERT_NEAR(out[i], want[i], norm_rel_tol(n) * std::fabs(want[i]) + 1e-30)
            << "n=" << n << " rows=" << rows << " i=" << i;
    }
}

namespace {

// HF's inverse frequencies for rot_dim and theta.
std::vector<float> rope_cos_sin(int rot_dim, int64_t max_pos, double theta = 10000.0) {
  std::vector<float> inv(size_t(rot_dim / 2));
  for (int i = 0; i < rot_dim / 2; ++i)
    inv[size_t(i)] = float(1.0 / std::pow(theta, 2.0 * i / rot_dim));
  std::vector<float> t(size_t(max_pos * rot_dim));
  ref::rope_table(inv.data(), rot_dim, max_pos, t.data());
  return t;
}

struct QkvCase {
  int hq, hkv, d, rot;
  ops::RopeLayout layout;
  bool qk_norm;
};

void check_qkv_rope_store(ops::Backend& be, std::mt19937& rng, const QkvCase& c, int64_t T) {
  const int64_t max_pos = 4096, num_slots = 300;
  const int64_t qrow = int64_t(c.hq) * c.d, kvrow = int64_t(c.hkv) * c.d, width = qrow + 2 * kvrow;
  auto table = rope_cos_sin(c.rot, max_pos);
  ops::RopeTable rope{Tensor(table.data(), DType::F32, {max_pos, c.rot}), c.rot, c.layout};
  auto qkv = randn(rng, size_t(T * width));
  auto qn = randn(rng, size_t(c.d)), kn = randn(rng, size_t(c.d));
  Tensor qn_t = f32(qn, {c.d}), kn_t = f32(kn, {c.d});
  std::vector<int32_t> pos(static_cast<size_t>(T)), slots(static_cast<size_t>(num_slots));
  std::uniform_int_distribution<int32_t> pd(0, int32_t(max_pos - 1));
  for (auto& p : pos) p = pd(rng);
  pos[0] = int32_t(max_pos - 1);  // the table's last row
  std::iota(slots.begin(), slots.end(), 0);
  std::shuffle(slots.begin(), slots.end(), rng);
  slots.resize(static_cast<size_t>(T));  // distinct, scattered
  const float sentinel = 1234.5f;
  std::vector<float> kpool(size_t(num_slots * kvrow), sentinel), vpool = kpool;
  std::vector<float> q(size_t(T * qrow), NAN);
  ops::KvLayer kv{f32(kpool, {num_slots, c.hkv, c.d}), f32(vpool, {num_slots, c.hkv, c.d})};
  be.qkv_rope_store(f32(qkv, {T, width}), c.qk_norm ? &qn_t : nullptr, c.qk_norm ? &kn_t : nullptr,
                    1e-6f, pos.data(), slots.data(), rope, c.hq, c.hkv, c.d, kv, f32(q, {T, qrow}));

  // Reference: split, per-head RMS norm (ref::rms_norm with one row per head), rotate.
  // Bound: with the norm, as in the RmsNorm test for n = d, after which the rotation's
  // two products and a sum add 3u of max(|x0|,|x1|); without it both sides run the same
  // rotation on the same inputs.
  const double tol_rel = c.qk_norm ? norm_rel_tol(c.d) + 4 * kU : 4 * kU;
  std::vector<bool> written(static_cast<size_t>(num_slots), false);
  for (int64_t t = 0; t < T; ++t) {
    const float* src = qkv.data() + t * width;
    std::vector<float> wq(src, src + qrow), wk(src + qrow, src + qrow + kvrow);
    const float* wv = src + qrow + kvrow;
    if (c.qk_norm) {
      ref::rms_norm(std::vector<float>(wq).data(), qn.data(), 1e-6f, c.hq, c.d, wq.data());
      ref::rms_norm(std::vector<float>(wk).data(), kn.data(), 1e-6f, c.hkv, c.d, wk.data());
    }
    // Scale for the absolute bound: the largest value in the head before rotation.
    auto head_scale = [&](const std::vector<float>& v, int h) {
      float m = 0;
      for (int i = 0; i < c.d; ++i) m = std::max(m, std::fabs(v[size_t(h * c.d + i)]));
      return m;
    };
    std::vector<float> sq(size_t(c.hq)), sk(size_t(c.hkv));
    for (int h = 0; h < c.hq; ++h) sq[size_t(h)] = head_scale(wq, h);
    for (int h = 0; h < c.hkv; ++h) sk[size_t(h)] = head_scale(wk, h);
    const float* cs = table.data() + int64_t(pos[size_t(t)]) * c.rot;
    ref::rope(wq.data(), c.hq, c.d, cs, c.rot, c.layout);
    ref::rope(wk.data(), c.hkv, c.d, cs, c.rot, c.layout);
    for (int64_t i = 0; i < qrow; ++i)
      ASSERT_NEAR(q[size_t(t * qrow + i)], wq[size_t(i)], 2 * tol_rel * sq[size_t(i / c.d)] + 1e-30)
          << "q t=" << t << " i=" << i;
    const int64_t s = slots[size_t(t)];
    written[size_t(s)] = true;
    for (int64_t i = 0; i < kvrow; ++i) {
      ASSERT_NEAR(kpool[size_t(s * kvrow + i)], wk[size_t(i)],
                  2 * tol_rel * sk[size_t(i / c.d)] + 1e-30)
          << "k t=" << t << " i=" << i;
      ASSERT_EQ(vpool[size_t(s * kvrow + i)], wv[i]) << "v t=" << t << " i=" << i;
    }
  }
  for (int64_t s = 0; s < num_slots; ++s)
    if (!written[size_t(s)])
      for (int64_t i = 0; i < kvrow; ++i) {
        ASSERT_EQ(kpool[size_t(s * kvrow + i)], sentinel) << "slot " << s << " overwritten";
        ASSERT_EQ(vpool[size_t(s * kvrow + i)], sentinel) << "slot " << s << " overwritten";
      }
}

}  // namespace

TEST(CpuBackend, QkvRopeStore) {
  auto be = backend();
  std::mt19937 rng(3);
  for (auto layout : {ops::RopeLayout::Neox, ops::RopeLayout::Interleaved})
    for (bool norm : {false, true})
      for (int d : {64, 128})
        for (int group : {1, 2, 3, 4})
          for (int64_t T : {1, 5, 33}) {
            SCOPED_TRACE(::testing::Message() << "layout " << int(layout) << " norm " << norm
                                              << " d " << d << " group " << group << " T " << T);
            check_qkv_rope_store(*be, rng, {2 * group, 2, d, d, layout, norm}, T);
          }
}

TEST(CpuBackend, QkvRopeStorePartialRotary) {
  // rot_dim < head_dim (e.g. partial rotary models): the tail of each head is only copied.
  auto be = backend();
  std::mt19937 rng(4);
  for (auto layout : {ops::RopeLayout::Neox, ops::RopeLayout::Interleaved})
    check_qkv_rope_store(*be, rng, {4, 2, 64, 32, layout, false}, 7);
}

TEST(CpuBackend, QkvRopeStoreRejectsPositionBeyondTable) {
  auto be = backend();
  auto table = rope_cos_sin(8, 4);
  ops::RopeTable rope{Tensor(table.data(), DType::F32, {4, 8}), 8, ops::RopeLayout::Neox};
  std::vector<float> qkv(3 * 8, 0.f), k(4 * 8), v(4 * 8), q(8);
  ops::KvLayer kv{f32(k, {4, 1, 8}), f32(v, {4, 1, 8})};
  int32_t pos = 4, slot = 0;
  EXPECT_THROW(be->qkv_rope_store(f32(qkv, {1, 24}), nullptr, nullptr, 1e-6f, &pos, &slot, rope, 1,
                                  1, 8, kv, f32(q, {1, 8})),
               std::runtime_error);
}

TEST(CpuBackend, WriteSlotTable) {
  auto be = backend();
  const int rows = 5, stride = 16;
  std::vector<int32_t> table(size_t(rows * stride), -7);
  std::vector<int32_t> req = {3, 3, 3, 0, 4}, pos = {0, 1, 2, 15, 7}, slots = {100, 5, 42, 9, 0};
  be->write_slot_table(table.data(), stride, req.data(), pos.data(), slots.data(), 5);
  std::vector<int32_t> want(table.size(), -7);
  want[3 * stride + 0] = 100;
  want[3 * stride + 1] = 5;
  want[3 * stride + 2] = 42;
  want[0 * stride + 15] = 9;
  want[4 * stride + 7] = 0;
  EXPECT_EQ(table, want);
}

namespace {

struct SeqSpec {
  int q_len, seq_len;
};

// Packed variable-length batch: decodes first, as the engine builds it.
// f16: the pools are stored as F16 (CpuTuning::kv_f16); the reference sees the same rounded values.
void check_attention(ops::Backend& be, std::mt19937& rng, const std::vector<SeqSpec>& seqs, int hq,
                     int hkv, int d, bool f16 = false) {
  const int B = int(seqs.size());
  int total_kv = 0, T = 0, max_q = 0, max_seq = 0, num_decode = 0;
  for (const auto& s : seqs) {
    total_kv += s.seq_len;
    T += s.q_len;
    max_q = std::max(max_q, s.q_len);
    max_seq = std::max(max_seq, s.seq_len);
    if (s.q_len == 1 && num_decode == int(&s - seqs.data())) ++num_decode;
  }
  const int num_slots = total_kv + 37, max_reqs = B + 3, stride = max_seq + 5;
  const int64_t kvrow = int64_t(hkv) * d;
  auto kpool = randn(rng, size_t(num_slots * kvrow)), vpool = randn(rng, size_t(num_slots * kvrow));
  auto q = randn(rng, size_t(int64_t(T) * hq * d));
  // Slots scattered over the pool; request rows shuffled.
  std::vector<int32_t> perm(static_cast<size_t>(num_slots)), rows(static_cast<size_t>(max_reqs));
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng);
  std::iota(rows.begin(), rows.end(), 0);
  std::shuffle(rows.begin(), rows.end(), rng);
  std::vector<int32_t> req_to_slot(size_t(max_reqs * stride), -1);
  std::vector<int32_t> b_q_start, b_q_len, b_seq_len, b_req_idx;
  int next = 0, tok = 0;
  for (int b = 0; b < B; ++b) {
    b_q_start.push_back(tok);
    b_q_len.push_back(seqs[size_t(b)].q_len);
    b_seq_len.push_back(seqs[size_t(b)].seq_len);
    b_req_idx.push_back(rows[size_t(b)]);
    for (int j = 0; j < seqs[size_t(b)].seq_len; ++j)
      req_to_slot[size_t(rows[size_t(b)] * stride + j)] = perm[size_t(next++)];
    tok += seqs[size_t(b)].q_len;
  }
  ops::AttnMeta m;
  m.num_seqs = B;
  m.num_tokens = T;
  m.num_decode_seqs = num_decode;
  m.max_q_len = max_q;
  m.max_seq_len = max_seq;
  m.b_q_start = b_q_start.data();
  m.b_q_len = b_q_len.data();
  m.b_seq_len = b_seq_len.data();
  m.b_req_idx = b_req_idx.data();
  m.req_to_slot = req_to_slot.data();
  m.req_stride = stride;
  const float scale = 1.0f / std::sqrt(float(d));
  std::vector<float> out(q.size(), NAN);
  ops::KvLayer kv{f32(kpool, {num_slots, hkv, d}), f32(vpool, {num_slots, hkv, d})};
  std::vector<uint16_t> k16(kpool.size()), v16(vpool.size());
  if (f16) {
    for (size_t i = 0; i < kpool.size(); ++i) {
      k16[i] = f32_to_f16(kpool[i]);
      v16[i] = f32_to_f16(vpool[i]);
      kpool[i] = f16_to_f32(k16[i]);
      vpool[i] = f16_to_f32(v16[i]);
    }
    kv = {Tensor(k16.data(), DType::F16, {num_slots, hkv, d}), Tensor(v16.data(), DType::F16, {num_slots, hkv, d})};
  }
  be.attention(f32(q, {T, hq, d}), kv, m, hq, hkv, d, scale, f32(out, {T, hq, d}));

  // Reference: each query row of each head over its visible keys (positions <= its own),
  // kv head = q head / group. Bound: scores are O(1) (scale 1/sqrt(d) on N(0,1) data) and the
  // backend's fp32 dot has an error <= (d/8 + 4) u sum|q k| scale ~ 2e-5 at d = 128; softmax
  // weights then move by at most twice that relatively, and the fp32 sums over <= 1100 keys add
  // (n + 4) u ~ 7e-5 relative. So |err| <= 2e-4 max|v| is safe, while one key too many or too
  // few moves the output by ~ |v_j - out| / n >= 1e-3 for n <= 1100.
  std::vector<float> want(static_cast<size_t>(d));
  const int group = hq / hkv;
  for (int b = 0; b < B; ++b) {
    const auto& s = seqs[size_t(b)];
    for (int i = 0; i < s.q_len; ++i) {
      const int visible = s.seq_len - s.q_len + i + 1;
      const int64_t t = b_q_start[size_t(b)] + i;
      for (int h = 0; h < hq; ++h) {
        const int g = h / group;
        std::vector<const float*> ks(static_cast<size_t>(visible)),
            vs(static_cast<size_t>(visible));
        float vmax = 0;
        for (int j = 0; j < visible; ++j) {
          const int64_t slot = req_to_slot[size_t(rows[size_t(b)] * stride + j)];
          ks[size_t(j)] = kpool.data() + slot * kvrow + g * d;
          vs[size_t(j)] = vpool.data() + slot * kvrow + g * d;
          for (int e = 0; e < d; ++e) vmax = std::max(vmax, std::fabs(vs[size_t(j)][e]));
        }
        const float* qv = q.data() + (t * hq + h) * d;
        ref::attend(qv, ks.data(), vs.data(), visible, d, scale, want.data());
        const float* o = out.data() + (t * hq + h) * d;
        for (int e = 0; e < d; ++e)
          ASSERT_NEAR(o[e], want[size_t(e)], 2e-4 * vmax)
              << "seq " << b << " (q_len " << s.q_len << ", seq_len " << s.seq_len << ") query "
              << i << " head " << h << " dim " << e;
      }
    }
  }
}

}  // namespace

TEST(CpuBackend, AttentionDecodeOnly) {
  for (const auto& be : backends_per_isa()) {
    SCOPED_TRACE(be->name());
    std::mt19937 rng(5);
    check_attention(*be, rng, {{1, 1}, {1, 2}, {1, 17}, {1, 1000}, {1, 64}, {1, 65}}, 4, 4, 64);
    check_attention(*be, rng, {{1, 300}, {1, 3}}, 8, 2, 128);
  }
}

TEST(CpuBackend, AttentionPrefillOnly) {
  for (const auto& be : backends_per_isa()) {
    SCOPED_TRACE(be->name());
    std::mt19937 rng(6);
    // Whole prompts (seq_len == q_len), q_len around the 64-query work chunk, and a chunk of a
    // longer prompt (seq_len > q_len: the earlier tokens are already in the pool).
    check_attention(*be, rng, {{2, 2}, {63, 63}, {64, 64}, {65, 65}, {150, 400}}, 4, 2, 64);
    // Row blocks with remainders (groups of 5, 13 tokens), head dims off the vector blocks.
    check_attention(*be, rng, {{13, 13}, {37, 90}}, 5, 1, 96);
    check_attention(*be, rng, {{21, 21}, {3, 40}}, 6, 2, 32);
  }
}

// Few work items (one decode, or one short prefill chunk, over long contexts): the keys are
// split over several items whose partial softmax results are merged. A wrong merge weight moves
// outputs by O(|v|), far beyond the bound; single-key errors are the other tests' job.
TEST(CpuBackend, AttentionLongContextSplitsKeys) {
  for (const auto& be : backends_per_isa()) {
    SCOPED_TRACE(be->name());
    std::mt19937 rng(8);
    check_attention(*be, rng, {{1, 2500}}, 9, 3, 64);
    check_attention(*be, rng, {{1, 1031}}, 4, 4, 128);
    check_attention(*be, rng, {{5, 1800}}, 9, 3, 64);
    check_attention(*be, rng, {{1, 700}, {1, 513}}, 2, 1, 64);
  }
}

TEST(CpuBackend, AttentionF16Cache) {
  for (const auto& be : backends_per_isa()) {
    SCOPED_TRACE(be->name());
    std::mt19937 rng(9);
    check_attention(*be, rng, {{1, 1}, {1, 300}, {37, 37}, {20, 90}}, 9, 3, 64, true);
    check_attention(*be, rng, {{1, 2000}}, 8, 2, 128, true);
  }
}

// With F16 pools the stored K and V are the fp32 path's values rounded once to F16 (the fp32
// path itself is checked against the reference above).
TEST(CpuBackend, QkvRopeStoreF16Cache) {
  auto be = backend();
  std::mt19937 rng(10);
  const int hq = 6, hkv = 2, d = 64, T = 9, slots_n = 20;
  const int64_t kvrow = hkv * d, width = (hq + 2 * hkv) * d;
  std::vector<float> qkv = randn(rng, size_t(T * width));
  const int max_pos = 64;
  std::vector<float> inv(d / 2), table(size_t(max_pos) * d);
  for (int i = 0; i < d / 2; ++i) inv[size_t(i)] = std::pow(10000.f, -2.f * i / d);
  ref::rope_table(inv.data(), d, max_pos, table.data());
  ops::RopeTable rope{f32(table, {max_pos, d}), d, ops::RopeLayout::Neox};
  std::vector<int32_t> pos = {0, 5, 63, 7, 1, 2, 40, 41, 3}, slots = {19, 0, 7, 3, 11, 12, 5, 8, 2};
  std::vector<float> k32(size_t(slots_n * kvrow), 0), v32 = k32, q1(size_t(T * hq * d)), q2 = q1;
  std::vector<uint16_t> k16(k32.size(), 0x7e00), v16(k32.size(), 0x7e00);  // NaN sentinels
  ops::KvLayer kv32{f32(k32, {slots_n, hkv, d}), f32(v32, {slots_n, hkv, d})};
  ops::KvLayer kv16{Tensor(k16.data(), DType::F16, {slots_n, hkv, d}), Tensor(v16.data(), DType::F16, {slots_n, hkv, d})};
  be->qkv_rope_store(f32(qkv, {T, width}), nullptr, nullptr, 1e-6f, pos.data(), slots.data(), rope, hq, hkv, d,
                     kv32, f32(q1, {T, int64_t(hq) * d}));
  be->qkv_rope_store(f32(qkv, {T, width}), nullptr, nullptr, 1e-6f, pos.data(), slots.data(), rope, hq, hkv, d,
                     kv16, f32(q2, {T, int64_t(hq) * d}));
  EXPECT_EQ(q1, q2);
  for (int s = 0; s < slots_n; ++s) {
    const bool used = std::find(slots.begin(), slots.end(), s) != slots.end();
    for (int64_t i = 0; i < kvrow; ++i) {
      const size_t at = size_t(s * kvrow + i);
      if (!used) {
        ASSERT_EQ(k16[at], 0x7e00) << "slot " << s << " overwritten";
        continue;
      }
      ASSERT_EQ(k16[at], f32_to_f16(k32[at])) << "k slot " << s << " i " << i;
      ASSERT_EQ(v16[at], f32_to_f16(v32[at])) << "v slot " << s << " i " << i;
    }
  }
}

TEST(CpuBackend, AttentionMixedBatchesRandom) {
  for (const auto& be : backends_per_isa()) {
    SCOPED_TRACE(be->name());
    std::mt19937 rng(7);
    const int shapes[][3] = {{4, 4, 64}, {4, 2, 64}, {6, 2, 128}, {8, 2, 128}, {3, 1, 64}};
    for (const auto& sh : shapes)
      for (int rep = 0; rep < 3; ++rep) {
        std::vector<SeqSpec> seqs;
        std::uniform_int_distribution<int> nd(0, 5), np(0, 3), ctx(1, 1000), ql(2, 90);
        const int n_dec = nd(rng), n_pre = std::max(rep == 0 ? 1 : 0, np(rng));
        for (int i = 0; i < n_dec; ++i) seqs.push_back({1, ctx(rng)});
        for (int i = 0; i < n_pre; ++i) {
          const int q = ql(rng);
          seqs.push_back({q, q + (i % 2 ? ctx(rng) % 300 : 0)});
        }
        if (seqs.empty()) seqs.push_back({1, ctx(rng)});
        SCOPED_TRACE(::testing::Message() << "heads " << sh[0] << "/" << sh[1] << " d " << sh[2]
                                          << " decodes " << n_dec << " prefills " << n_pre);
        check_attention(*be, rng, seqs, sh[0], sh[1], sh[2]);
      }
  }
}

TEST(CpuBackend, Swiglu) {
  auto be = backend();
  std::mt19937 rng(8);
  for (int64_t F : {1, 7, 64, 1536})
    for (int64_t T : {1, 3, 9}) {
      auto gu = randn(rng, size_t(T * 2 * F), 3.0f);
      std::vector<float> out(size_t(T * F), NAN), want(size_t(T * F));
      be->swiglu(f32(gu, {T, 2 * F}), f32(out, {T, F}));
      ref::swiglu(gu.data(), T, F, want.data());
      // Same formula in fp32 on both sides; exp may come from a vectorised libm: a few ulps.
      for (size_t i = 0; i < out.size(); ++i)
        ASSERT_NEAR(out[i], want[i], 8 * kU * std::fabs(want[i]) + 1e-30)
            << "F=" << F << " i=" << i;
    }
}

TEST(CpuBackend, GatherRows) {
  auto be = backend();
  std::mt19937 rng(9);
  auto x = randn(rng, 10 * 6);
  std::vector<int32_t> rows = {9, 0, 0, 4, 9};
  std::vector<float> out(5 * 6, NAN);
  be->gather_rows(f32(x, {10, 6}), rows.data(), 5, f32(out, {5, 6}));
  for (int i = 0; i < 5; ++i)
    for (int j = 0; j < 6; ++j)
      EXPECT_EQ(out[size_t(i * 6 + j)], x[size_t(rows[size_t(i)] * 6 + j)]);
  // Rows of a block-quantised tensor are copied as bytes.
  Weight w = make_weight(rng, DType::Q8_0, 10, 64);
  std::vector<uint8_t> qout(5 * row_bytes(DType::Q8_0, 64), 0);
  be->gather_rows(w.tensor(), rows.data(), 5, Tensor(qout.data(), DType::Q8_0, {5, 64}));
  const size_t rb = row_bytes(DType::Q8_0, 64);
  for (int i = 0; i < 5; ++i)
    EXPECT_EQ(0, std::memcmp(qout.data() + size_t(i) * rb,
                             w.bytes.data() + size_t(rows[size_t(i)]) * rb, rb));
}

TEST(CpuBackend, EmbeddingAllTableTypes) {
  // Rows decoded with dequantize_row (checked against gguf's decoder in test_quant).
  auto be = backend();
  std::mt19937 rng(10);
  const int64_t vocab = 11, dim = 512;
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::Q4_0, DType::Q4_1, DType::Q8_0,
                  DType::Q4_K, DType::Q5_K, DType::Q6_K}) {
    std::vector<uint8_t> table;
    if (t == DType::Q4_K || t == DType::Q5_K || t == DType::Q6_K) {
      for (int64_t r = 0; r < vocab; ++r) {
        auto row = random_kquant_row(rng, t, dim);
        table.insert(table.end(), row.begin(), row.end());
      }
    } else {
      table = make_weight(rng, t, vocab, dim).bytes;
    }
    Tensor tt(table.data(), t, {vocab, dim});
    std::vector<int32_t> ids = {3, 10, 0, 3};
    std::vector<float> out(ids.size() * dim, NAN), want(dim);
    be->embedding(tt, ids.data(), int(ids.size()), f32(out, {int64_t(ids.size()), dim}));
    for (size_t i = 0; i < ids.size(); ++i) {
      dequantize_row(t, tt.row(ids[i]), want.data(), dim);
      for (int64_t j = 0; j < dim; ++j)
        ASSERT_EQ(out[i * dim + size_t(j)], want[size_t(j)]) << dtype_name(t) << " id " << ids[i];
    }
    int32_t bad_hi = int32_t(vocab), bad_lo = -1;
    EXPECT_THROW(be->embedding(tt, &bad_hi, 1, f32(out, {1, dim})), std::runtime_error);
    EXPECT_THROW(be->embedding(tt, &bad_lo, 1, f32(out, {1, dim})), std::runtime_error);
  }
}

TEST(CpuBackend, ArgmaxPerRowWithinLimit) {
  // Row 0: max 5 at column 2 (a larger value at column 6 lies beyond limit 6 and is ignored).
  // Row 1: tie between columns 1 and 4 -> the lower index. Row 2: -inf everywhere but column 5.
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> l = {1, 2, 5, -1, 4, 0, 9, 9,  //
                          0, 3, 1, 2, 3, -5, 7, 0,  //
                          -inf, -inf, -inf, -inf, -inf, -2, 100, -inf};
  int32_t out[3] = {-1, -1, -1};
  backend()->argmax(f32(l, {3, 8}), 3, 6, out);
  EXPECT_EQ(out[0], 2);
  EXPECT_EQ(out[1], 1);
  EXPECT_EQ(out[2], 5);
  // Random rows against a plain scan with limit == V.
  std::mt19937 rng(11);
  auto x = randn(rng, 5 * 1000);
  int32_t o[5];
  backend()->argmax(f32(x, {5, 1000}), 5, 1000, o);
  for (int r = 0; r < 5; ++r) {
    const float* row = x.data() + r * 1000;
    EXPECT_EQ(o[r], int32_t(std::max_element(row, row + 1000) - row)) << "row " << r;
  }
}

// The engine's requirement on CPU attention: a query row's output does not depend on the other
// rows of its work item (a cached prompt's last token runs alone, the same token uncached sits
// inside a prefill chunk, and sampled tokens must not differ). Each row of a prefill chunk is
// compared bit for bit with the same row computed as a lone 1-token query over the same keys.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "backend_test_util.h"
#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/cpu_isa.h"
#include "core/half.h"

using namespace lite_llama;
using namespace lite_llama::test;

namespace {

struct Shape {
  int hq, hkv, d;
};

// One sequence: `cached` keys already in the pool, a chunk of `chunk` new query tokens.
// first_row: the first token of the chunk compared (later ones only where earlier ones could be
// split over other key ranges than alone).
void check_rows_alone(ops::Backend& be, std::mt19937& rng, Shape sh, int cached, int chunk, bool f16,
                      int first_row = 0) {
  const int sl = cached + chunk, slots = sl + 11;
  const int64_t kvrow = int64_t(sh.hkv) * sh.d, qrow = int64_t(sh.hq) * sh.d;
  auto kpool = randn(rng, size_t(slots * kvrow)), vpool = randn(rng, size_t(slots * kvrow));
  auto q = randn(rng, size_t(chunk * qrow));
  std::vector<int32_t> table(static_cast<size_t>(sl));
  std::iota(table.begin(), table.end(), 0);
  std::shuffle(table.begin(), table.end(), rng);
  std::vector<uint16_t> k16(kpool.size()), v16(vpool.size());
  ops::KvLayer kv{Tensor(kpool.data(), DType::F32, {slots, sh.hkv, sh.d}),
                  Tensor(vpool.data(), DType::F32, {slots, sh.hkv, sh.d})};
  if (f16) {
    for (size_t i = 0; i < kpool.size(); ++i) k16[i] = f32_to_f16(kpool[i]), v16[i] = f32_to_f16(vpool[i]);
    kv = {Tensor(k16.data(), DType::F16, {slots, sh.hkv, sh.d}), Tensor(v16.data(), DType::F16, {slots, sh.hkv, sh.d})};
  }
  const float scale = 1.0f / std::sqrt(float(sh.d));
  auto run = [&](const float* qp, int ql, int seq_len, float* out) {
    std::vector<int32_t> qs{0}, qlen{ql}, slen{seq_len}, req{0};
    ops::AttnMeta m;
    m.num_seqs = 1;
    m.num_tokens = ql;
    m.num_decode_seqs = ql == 1 ? 1 : 0;
    m.max_q_len = ql;
    m.max_seq_len = seq_len;
    m.b_q_start = qs.data();
    m.b_q_len = qlen.data();
    m.b_seq_len = slen.data();
    m.b_req_idx = req.data();
    m.req_to_slot = table.data();
    m.req_stride = sl;
    be.attention(Tensor(const_cast<float*>(qp), DType::F32, {ql, sh.hq, sh.d}), kv, m, sh.hq, sh.hkv, sh.d,
                 scale, Tensor(out, DType::F32, {ql, sh.hq, sh.d}));
  };
  std::vector<float> all(q.size()), one(static_cast<size_t>(qrow));
  run(q.data(), chunk, sl, all.data());
  for (int i = first_row; i < chunk; ++i) {
    run(q.data() + i * qrow, 1, cached + i + 1, one.data());
    ASSERT_EQ(std::memcmp(one.data(), all.data() + i * qrow, size_t(qrow) * sizeof(float)), 0)
        << "heads " << sh.hq << "/" << sh.hkv << " d " << sh.d << (f16 ? " f16" : " f32") << " cached "
        << cached << " chunk " << chunk << ": token " << i << " differs when alone";
  }
}

std::vector<std::unique_ptr<ops::Backend>> backends(int threads) {
  std::vector<CpuIsaChoice> isas = {CpuIsaChoice::Generic};
  const cpu::CpuIsa best = cpu::detect_cpu_isa();
  if (best != cpu::CpuIsa::Generic) isas.push_back(CpuIsaChoice::Avx2);
  if (best == cpu::CpuIsa::Avx512) isas.push_back(CpuIsaChoice::Avx512);
  std::vector<std::unique_ptr<ops::Backend>> v;
  for (CpuIsaChoice isa : isas) {
    CpuTuning t;
    t.isa = isa;
    v.push_back(cpu::make_cpu_backend(threads, t));
  }
  return v;
}

}  // namespace

// One thread: with 3+ KV heads a lone query is never split over key ranges, so the rows'
// results must match whatever the chunk. Groups 1-4, head dims 64 / 128, f32 and f16 pools.
TEST(CpuAttentionRows, ChunkRowsMatchLoneQueryBitwise) {
  const Shape shapes[] = {{9, 3, 64}, {3, 3, 64}, {6, 3, 128}, {12, 3, 64}, {16, 4, 128}, {8, 4, 64}};
  for (const auto& be : backends(1)) {
    SCOPED_TRACE(be->name());
    std::mt19937 rng(11);
    for (const Shape& sh : shapes)
      for (bool f16 : {false, true})
        for (int cached : {0, 5, 300, 2100})
          for (int chunk : {1, 2, 7, 17, 40}) {
            if (cached > 300 && chunk > 17) continue;  // keep the run short
            check_rows_alone(*be, rng, sh, cached, chunk, f16);
            if (HasFatalFailure()) return;
          }
  }
}

// Fewer KV heads than items wanted: a lone query may be split over key ranges; below 512 keys it
// is not, and rows must match.
TEST(CpuAttentionRows, ShortContextFewKvHeadsBitwise) {
  const Shape shapes[] = {{4, 1, 64}, {8, 2, 128}, {2, 2, 64}, {7, 1, 64}, {8, 2, 32}, {4, 2, 96}, {4, 2, 256}, {16, 2, 64},
                          {6, 2, 48}, {3, 1, 80}};  // 48, 80: the AVX2 rows path at 6 and 10 vectors
  for (const auto& be : backends(1)) {
    SCOPED_TRACE(be->name());
    std::mt19937 rng(12);
    for (const Shape& sh : shapes)
      for (bool f16 : {false, true})
        for (int cached : {0, 3, 200, 470})
          for (int chunk : {1, 3, 16, 33, 40}) {
            if (cached + chunk >= 512) continue;
            check_rows_alone(*be, rng, sh, cached, chunk, f16);
            if (HasFatalFailure()) return;
          }
  }
}

// Two threads: a lone query over 512+ keys is split over key ranges and merged (items of several
// KV heads); a chunk of up to 16 tokens is split alike, and its last token sees the same keys as
// alone, so the same ranges: that row must match too.
TEST(CpuAttentionRows, SplitKeysLastTokenBitwise) {
  const Shape shapes[] = {{9, 3, 64}, {8, 2, 128}, {16, 4, 64}, {4, 1, 64}};
  for (const auto& be : backends(2)) {
    SCOPED_TRACE(be->name());
    std::mt19937 rng(13);
    for (const Shape& sh : shapes)
      for (bool f16 : {false, true})
        for (int cached : {600, 2100})
          for (int chunk : {2, 5, 16}) {
            check_rows_alone(*be, rng, sh, cached, chunk, f16, chunk - 1);
            if (HasFatalFailure()) return;
          }
  }
}

// CUDA attention (flash-decoding for q_len == 1, tiled flash attention for prefill chunks)
// against the CPU backend, over packed batches with scattered slots: decode only, prefill only
// (with and without a prefix already in the pool: chunked prefill), and mixed batches.
#include <array>
#include <cstring>

#include "backends/cuda/launchers.h"
#include "kernels/attention_harness.h"

using namespace lite_llama;
using namespace lite_llama::kt;

namespace {

// Whether the unsplit prefill of `seqs` hands out the tiles of all heads interleaved (small grids)
// or one head's at a time (cuda::prefill_interleaves): the tests below run both orders.
bool interleaves(const std::vector<SeqSpec>& seqs, int hkv, int d) {
  int longest = 0;
  for (const SeqSpec& s : seqs) longest = std::max(longest, s.seq_len);
  return cuda::prefill_interleaves(longest, int(seqs.size()), hkv, d);
}
// Three sequences whose grid interleaves at every head shape below (up to 8 KV heads, D 128).
const std::vector<SeqSpec> kFewSeqs = {{600, 600}, {130, 542}, {5, 5}};

class CudaAttention : public CudaVsCpu {
 protected:
  // Runs one problem on both backends and compares every (token, head) row.
  void check(std::mt19937& rng, const std::vector<SeqSpec>& seqs, int num_decode, int hq, int hkv,
             int d, AttnFill fill = AttnFill::Random, int max_seq_len_override = 0) {
    SCOPED_TRACE(::testing::Message() << "Hq " << hq << " Hkv " << hkv << " D " << d << " seqs "
                                      << seqs.size() << " (decode " << num_decode << ")"
                                      << (fill == AttnFill::ExactProbes ? " exact probes" : "")
                                      << (max_seq_len_override ? " max_seq_len overstated" : ""));
    AttnProblem P = make_attn_problem(rng, seqs, num_decode, hq, hkv, d, act, fill,
                                      max_seq_len_override ? max_seq_len_override : 5);
    const std::vector<float> want = cpu_attention(*cpu, P);
    GpuAttn g;
    g.upload(*gpu, P, act);
    // What CUDA graphs do: launch shapes from a bound far above the real lengths, the lengths
    // themselves from device memory.
    if (max_seq_len_override) g.meta.max_seq_len = P.max_seq + max_seq_len_override;
    const std::vector<float> got = g.run(*gpu, P);
    ASSERT_TRUE(check_attn(got, want, P, act, fill));
  }
  // Both unsplit block orders: `seqs` (one head at a time) with exact probes and random values,
  // then kFewSeqs (all heads interleaved) with exact probes.
  void check_both_orders(std::mt19937& rng, const std::vector<SeqSpec>& seqs, int hq, int hkv, int d) {
    ASSERT_FALSE(interleaves(seqs, hkv, d));
    ASSERT_TRUE(interleaves(kFewSeqs, hkv, d));
    check(rng, seqs, 0, hq, hkv, d, AttnFill::ExactProbes);
    check(rng, seqs, 0, hq, hkv, d);
    check(rng, kFewSeqs, 0, hq, hkv, d, AttnFill::ExactProbes);
  }
  // cases(hq, hkv, d) for D 64 and 128 and each head shape, on a GPU backend built with tuning t
  // (the default one again afterwards); stops at the first fatal failure.
  template <typename F>
  void with_tuning(const CudaTuning& t, std::initializer_list<const int*> heads, F cases) {
    std::unique_ptr<ops::Backend> g = make_gpu(GetParam(), t);
    std::swap(gpu, g);
    for (int d : {64, 128}) {
      for (const int* h : heads) {
        cases(h[0], h[1], d);
        if (HasFatalFailure()) break;
      }
      if (HasFatalFailure()) break;
    }
    std::swap(gpu, g);
  }
};

// (Hq, Hkv): GQA groups 1, 2, 3, 4, 8 (groups above 8: DecodeGroupsAboveEight).
constexpr int kHeads[][2] = {{8, 8}, {8, 4}, {9, 3}, {16, 4}, {16, 2}, {32, 8}, {64, 8}};
constexpr int kDecodeLens[] = {1, 2, 63, 64, 65, 1000, 8300, 17000};

std::vector<SeqSpec> decodes(std::initializer_list<int> lens) {
  std::vector<SeqSpec> s;
  for (int n : lens) s.push_back({1, n});
  return s;
}

}  // namespace

TEST_P(CudaAttention, DecodeLengthsPastEightK) {
  // All lengths in one batch (the split count depends on the batch), for every head shape.
  std::mt19937 rng(401);
  for (int d : {64, 128})
    for (const auto& h : kHeads) {
      check(rng, decodes({1, 2, 63, 64, 65, 1000, 8300, 17000}), 8, h[0], h[1], d);
      if (HasFatalFailure()) return;
    }
}

TEST_P(CudaAttention, DecodeSingleSequenceEachLength) {
  // One sequence alone gets the most splits (~2 * SMs / Hkv, at most 64, >= 64 keys each).
  std::mt19937 rng(402);
  for (int d : {64, 128})
    for (int n : kDecodeLens)
      for (const auto& h : {kHeads[1], kHeads[5]}) {
        check(rng, decodes({n}), 1, h[0], h[1], d);
        if (HasFatalFailure()) return;
      }
}

TEST_P(CudaAttention, DecodeGroupsAboveEight) {
  // A block holds 16 query heads of a group: with 9-16 (64/4) every softmax row is stepped; 20
  // (40/2) takes two head chunks, 16 rows and then 4 (rows 0-7 only), as groups of 3-8 do.
  std::mt19937 rng(407);
  for (int d : {64, 128})
    for (const auto& h : {std::array<int, 2>{64, 4}, std::array<int, 2>{40, 2}, std::array<int, 2>{36, 4}}) {
      check(rng, decodes({1, 63, 65, 1000, 9000}), 5, h[0], h[1], d);
      check(rng, decodes({2, 64, 300}), 3, h[0], h[1], d, AttnFill::ExactProbes, 4000);
      if (HasFatalFailure()) return;
    }
}

TEST_P(CudaAttention, DecodeBatchSizes) {
  std::mt19937 rng(403);
  std::uniform_int_distribution<int> len(1, 1500);
  for (int B : {1, 2, 3, 7, 16, 33, 64})
    for (const auto& h : {kHeads[0], kHeads[2], kHeads[5], kHeads[6]})
      for (int d : {64, 128}) {
        std::vector<SeqSpec> seqs;
        for (int b = 0; b < B; ++b) seqs.push_back({1, len(rng)});
        check(rng, seqs, B, h[0], h[1], d);
        if (HasFatalFailure()) return;
      }
}

TEST_P(CudaAttention, DecodeWithOverstatedMaxSeqLen) {
  // max_seq_len far above the real lengths (a graph captured for long contexts, replayed for
  // short ones): more splits, some of them empty; the result must not change.
  std::mt19937 rng(404);
  for (int d : {64, 128})
    for (const auto& h : {kHeads[1], kHeads[2], kHeads[6]}) {
      check(rng, decodes({1, 2, 65, 300}), 4, h[0], h[1], d, AttnFill::Random, 16000);
      check(rng, decodes({7}), 1, h[0], h[1], d, AttnFill::Random, 4000);
      check(rng, decodes({1, 3, 64, 129, 1000}), 5, h[0], h[1], d, AttnFill::ExactProbes, 16000);
      if (HasFatalFailure()) return;
    }
}

TEST_P(CudaAttention, DecodeWithSplitKeysFloor) {
  // CudaTuning::decode_split_keys = n: the grid is sized for >= n keys a split and each sequence
  // uses only the first ceil(len / keys_per_split) splits; the merge must skip the rest (they hold
  // no partials). Lengths below, at and above n, with graph-style overstated max_seq_len too.
  // The other tests run the default (16); 0 is the old sizing (64 keys a split in the grid).
  for (int keys : {0, 1, 100}) {
    CudaTuning t;
    t.decode_split_keys = keys;
    SCOPED_TRACE(::testing::Message() << "split keys " << keys);
    std::mt19937 rng(406);
    with_tuning(t, {kHeads[1], kHeads[4], kHeads[6]}, [&](int hq, int hkv, int d) {
      check(rng, decodes({1, 15, 16, 17, 100, 101, 1000, 4500}), 8, hq, hkv, d);
      check(rng, decodes({3, 16, 300}), 3, hq, hkv, d, AttnFill::Random, 16000);
      check(rng, decodes({1, 33, 64, 129}), 4, hq, hkv, d, AttnFill::ExactProbes, 4000);
    });
    if (HasFatalFailure()) return;
  }
}

TEST_P(CudaAttention, DecodeReadsContiguousRunsWithoutTheTable) {
  // Sequences whose first keys are at contiguous slots (ops::AttnMeta::b_kv_runs): the splits
  // inside a run compute the K/V addresses. The device's slot table is wrong (another slot) for
  // the first keys of every run, up to a quarter of the sequence before its end (more than any
  // split: one sequence of 2 KV heads takes >= 8 splits), so a split that read the table there
  // fails; one that used the run past its end reads other keys' K/V and fails too. Outputs must
  // equal, bit for bit, those from the true table without runs.
  std::mt19937 rng(408);
  static constexpr int kTwoKvHeads[][2] = {{16, 2}, {4, 2}};
  const std::vector<std::pair<std::vector<int>, std::vector<int>>> cases = {
      {{3000}, {3000}},                   // the whole sequence, the new key's split too
      {{5000, 700, 4100}, {2000, 0, 4100}},  // a run ending inside the sequence; none
      {{3001}, {10}},                     // a run shorter than a split: the table everywhere
  };
  for (int d : {64, 128})
    for (const auto& h : kTwoKvHeads)
      for (const auto& [lens, runs] : cases) {
        SCOPED_TRACE(::testing::Message() << "D " << d << " Hq " << h[0] << " Hkv " << h[1] << " seqs " << lens.size());
        std::vector<SeqSpec> seqs;
        for (int n : lens) seqs.push_back({1, n});
        AttnProblem P = make_attn_problem(rng, seqs, int(seqs.size()), h[0], h[1], d, act);
        const std::vector<int32_t> kv_runs = make_kv_runs(P, runs);
        const std::vector<float> want = cpu_attention(*cpu, P);
        GpuAttn g;
        g.upload(*gpu, P, act);
        const std::vector<float> plain = g.run(*gpu, P);
        ASSERT_TRUE(check_attn(plain, want, P, act, AttnFill::Random));
        std::vector<int32_t> table = P.req_to_slot;
        for (size_t b = 0; b < seqs.size(); ++b)
          for (int j = 0; j < runs[b] - lens[b] / 4; ++j) {
            int32_t& e = table[size_t(P.b_req_idx[b]) * size_t(P.stride) + size_t(j)];
            e = (e + 1) % P.num_slots;
          }
        g.set_runs(*gpu, kv_runs, table);
        const std::vector<float> got = g.run(*gpu, P);
        ASSERT_TRUE(check_attn(got, want, P, act, AttnFill::Random));
        ASSERT_EQ(0, std::memcmp(got.data(), plain.data(), got.size() * sizeof(float)));
      }
}

TEST_P(CudaAttention, PrefillChunksWithPrefixes) {
  // Whole prompts (prefix 0) and chunks of longer prompts (prefix 37 / 512 already in the pool),
  // q_len around the 64-query tile.
  std::mt19937 rng(405);
  std::vector<SeqSpec> seqs;
  for (int q : {1, 5, 64, 65, 130})
    for (int prefix : {0, 37, 512}) seqs.push_back({q, q + prefix});
  for (int d : {64, 128})
    for (const auto& h : kHeads) {
      check(rng, seqs, 0, h[0], h[1], d);
      if (HasFatalFailure()) return;
    }
}

TEST_P(CudaAttention, PrefillLongChunks) {
  std::mt19937 rng(406);
  const std::vector<SeqSpec> seqs = {{700, 700}, {700, 737}, {700, 1212}};
  for (int d : {64, 128})
    for (const auto& h : {kHeads[1], kHeads[2], kHeads[5]}) {
      check(rng, seqs, 0, h[0], h[1], d);
      if (HasFatalFailure()) return;
    }
}

TEST_P(CudaAttention, PrefillPastEightK) {
  // Long prompts and chunks at odd lengths, whole and after a long cached prefix (a short new turn
  // of a long chat), in one mixed-length batch; random values and exact key probes.
  // Few heads (GQA groups 4 and 3) keep the CPU reference at seconds.
  std::mt19937 rng(411);
  const std::vector<SeqSpec> seqs = {{8193, 8193}, {1001, 9501}, {17, 12007}, {130, 130}};
  constexpr int kFewHeads[][2] = {{4, 1}, {6, 2}};
  for (int d : {64, 128})
    for (const auto& h : kFewHeads) {
      check(rng, seqs, 0, h[0], h[1], d);
      check(rng, seqs, 0, h[0], h[1], d, AttnFill::ExactProbes);
      if (HasFatalFailure()) return;
    }
}

TEST_P(CudaAttention, PrefillOnTheMmaSyncKernel) {
  // On an sm_90 GPU the unsplit prefill takes the wgmma kernel; the mma.sync one (sm_80, and
  // CudaTuning::prefill_wgmma = false) gets the same long, odd and chunked cases here.
  CudaTuning t;
  t.prefill_wgmma = false;
  std::mt19937 rng(413);
  std::vector<SeqSpec> seqs;
  for (int q : {1, 5, 64, 65, 130, 700})
    for (int prefix : {0, 37, 512}) seqs.push_back({q, q + prefix});
  with_tuning(t, {kHeads[0], kHeads[2], kHeads[5]}, [&](int hq, int hkv, int d) {
    check_both_orders(rng, seqs, hq, hkv, d);
    // After the last head shape of each D: long prompts, one past 8k keys.
    if (!HasFatalFailure() && hq == kHeads[5][0] && hkv == kHeads[5][1])
      check(rng, {{8193, 8193}, {1001, 9501}, {130, 130}}, 0, 4, 1, d);
  });
}

TEST_P(CudaAttention, PrefillTwoAndThreeWarpgroups) {
  // At head dim 64 the wgmma kernel tiles 128 or 192 rows a block by the grid's size
  // (CudaTuning::prefill_wg3_waves); each tiling, forced, on odd, chunked and mixed-length cases,
  // in both block orders (one head at a time: the 21 short sequences; all heads interleaved: three
  // of them).
  for (int waves : {0, 1 << 30}) {
    CudaTuning t;
    t.prefill_wg3_waves = waves;
    std::mt19937 rng(414 + waves % 7);
    std::vector<SeqSpec> seqs;
    for (int q : {1, 5, 47, 48, 49, 130, 700})
      for (int prefix : {0, 37, 512}) seqs.push_back({q, q + prefix});
    with_tuning(t, {kHeads[2], kHeads[5], kHeads[6]}, [&](int hq, int hkv, int d) {
      check_both_orders(rng, seqs, hq, hkv, d);
      if (!HasFatalFailure() && hq == kHeads[5][0] && hkv == kHeads[5][1])
        check(rng, {{4100, 4100}, {1001, 5001}, {130, 130}}, 0, 8, 2, d, AttnFill::ExactProbes);
    });
    if (HasFatalFailure()) return;
  }
}

TEST_P(CudaAttention, ShortChunkAfterLongPrefix) {
  // The next turn of a cached chat: one short chunk whose query tiles fill few blocks, so its keys
  // are split over blocks and merged (prefill_splits), alone and after decodes in the same call.
  // Split ranges are whole key tiles (64 keys mma.sync, 128 wgmma), so probes at every tile edge
  // catch a key lost or repeated. On sm_90 the splits are wgmma blocks
  // (CudaTuning::prefill_wgmma_split); the mma.sync ones get the same cases in
  // ShortChunkAfterLongPrefixOnMmaSync.
  std::mt19937 rng(412);
  for (int d : {64, 128})
    for (const auto& h : {kHeads[0], kHeads[2], kHeads[5], kHeads[6]}) {
      for (int q : {1, 5, 47, 65})
        for (int prefix : {300, 4000, 9001}) {
          check(rng, {{q, q + prefix}}, 0, h[0], h[1], d);
          check(rng, {{q, q + prefix}}, 0, h[0], h[1], d, AttnFill::ExactProbes);
          if (HasFatalFailure()) return;
        }
      check(rng, {{1, 70}, {1, 5000}, {47, 4047}, {3, 10003}}, 2, h[0], h[1], d, AttnFill::ExactProbes);
      check(rng, {{1, 70}, {1, 5000}, {47, 4047}, {3, 10003}}, 2, h[0], h[1], d);
      if (HasFatalFailure()) return;
    }
}

TEST_P(CudaAttention, ShortChunkAfterLongPrefixOnMmaSync) {
  // ShortChunkAfterLongPrefix's split chunks on mma.sync blocks, as sm_80 GPUs and
  // CudaTuning::prefill_wgmma_split = false run them; and which kernel each split rule picks.
  for (int d : {64, 128}) {
    cuda::AttnArgs a{};
    a.Hq = 32, a.Hkv = 8, a.D = d, a.num_seqs = 1, a.max_q_len = 47, a.max_seq_len = 47 + 9001;
    const int rows = cuda::workspace_rows_per_head(d, 132);
    const int mma = cuda::prefill_splits(a, 47, 132, rows);
    EXPECT_GT(mma, 1);
    EXPECT_EQ(cuda::prefill_splits(a, 47, 132, rows, true, false), mma);
    // 16 wgmma blocks (32 tokens of a group of 4 each, 8 KV heads): 132 / 16 = 8 splits.
    EXPECT_EQ(cuda::prefill_splits(a, 47, 132, rows, true, true), cuda::attention_prefill_sm90_built() ? 8 : mma);
    // Below kSm90MinSplitKeys a split the wgmma grid stays whole.
    a.max_seq_len = 47 + 900;
    if (cuda::attention_prefill_sm90_built()) EXPECT_EQ(cuda::prefill_splits(a, 47, 132, rows, true, true), 1);
  }
  CudaTuning t;
  t.prefill_wgmma_split = false;
  std::mt19937 rng(416);
  with_tuning(t, {kHeads[2], kHeads[6]}, [&](int hq, int hkv, int d) {
    for (int q : {5, 65}) {
      check(rng, {{q, q + 9001}}, 0, hq, hkv, d, AttnFill::ExactProbes);
      check(rng, {{q, q + 4000}}, 0, hq, hkv, d);
    }
    check(rng, {{1, 70}, {1, 5000}, {47, 4047}, {3, 10003}}, 2, hq, hkv, d, AttnFill::ExactProbes);
  });
}

TEST_P(CudaAttention, ChunkAfterLongPrefixOnWgmma) {
  // A chunk of a few hundred tokens after a long prefix: the mma.sync kernel splits its keys, but on
  // sm_90 the unsplit wgmma grid fills half the SMs (of 132 here), so prefill_splits keeps it whole.
  std::mt19937 rng(415);
  for (int d : {64, 128})
    for (const auto& [h, q] : {std::pair{kHeads[5], 300}, std::pair{kHeads[6], 150}}) {
      cuda::AttnArgs a{};
      a.Hq = h[0], a.Hkv = h[1], a.D = d, a.num_seqs = 1, a.max_q_len = q, a.max_seq_len = q + 9001;
      const int rows = cuda::workspace_rows_per_head(d, 132);
      EXPECT_GT(cuda::prefill_splits(a, q, 132, rows), 1);
      const int whole = cuda::attention_prefill_sm90_built() ? 1 : cuda::prefill_splits(a, q, 132, rows);
      EXPECT_EQ(cuda::prefill_splits(a, q, 132, rows, true), whole);
      check(rng, {{q, q + 9001}}, 0, h[0], h[1], d, AttnFill::ExactProbes);
      check(rng, {{1, 4000}, {q, q + 9001}}, 1, h[0], h[1], d);  // after a decode in the same call
      if (HasFatalFailure()) return;
    }
}

TEST_P(CudaAttention, MixedDecodeAndPrefill) {
  // Decodes first, then prefill chunks, in one call (the engine's continuous batching).
  std::mt19937 rng(407);
  for (int rep = 0; rep < 4; ++rep)
    for (const auto& h : kHeads)
      for (int d : {64, 128}) {
        std::uniform_int_distribution<int> nd(1, 12), np(1, 4), ctx(1, 3000), ql(2, 200),
            pre(0, 600);
        std::vector<SeqSpec> seqs;
        const int n_dec = nd(rng), n_pre = np(rng);
        for (int i = 0; i < n_dec; ++i) seqs.push_back({1, ctx(rng)});
        for (int i = 0; i < n_pre; ++i) {
          const int q = ql(rng);
          seqs.push_back({q, q + (i % 2 ? pre(rng) : 0)});
        }
        check(rng, seqs, n_dec, h[0], h[1], d);
        if (HasFatalFailure()) return;
      }
  // A long decode beside a long prefill chunk.
  check(rng, {{1, 17000}, {1, 8300}, {700, 1212}, {65, 65}}, 2, 32, 8, 128);
}

TEST_P(CudaAttention, ExactKeySelectionDecode) {
  // Probes at every split and tile boundary: one key too many or too few fails.
  std::mt19937 rng(408);
  for (int d : {64, 128})
    for (const auto& h : {kHeads[0], kHeads[2], kHeads[4], kHeads[6]}) {
      for (int n : kDecodeLens) check(rng, decodes({n}), 1, h[0], h[1], d, AttnFill::ExactProbes);
      check(rng, decodes({1, 2, 63, 64, 65, 1000, 8300, 17000}), 8, h[0], h[1], d,
            AttnFill::ExactProbes);
      if (HasFatalFailure()) return;
    }
}

TEST_P(CudaAttention, ExactKeySelectionPrefill) {
  // Causal boundary of every query of every chunk, with and without a prefix.
  std::mt19937 rng(409);
  std::vector<SeqSpec> seqs;
  for (int q : {1, 5, 64, 65, 130, 700})
    for (int prefix : {0, 37, 512}) seqs.push_back({q, q + prefix});
  for (int d : {64, 128})
    for (const auto& h : {kHeads[0], kHeads[2], kHeads[4], kHeads[6]}) {
      check(rng, seqs, 0, h[0], h[1], d, AttnFill::ExactProbes);
      // Mixed with decodes, so the prefill part starts at an offset in the metadata arrays.
      check(rng, {{1, 70}, {1, 2000}, {130, 130}, {64, 601}}, 2, h[0], h[1], d,
            AttnFill::ExactProbes);
      if (HasFatalFailure()) return;
    }
}

TEST_P(CudaAttention, WorkspaceBoundIsEnough) {
  // attention_workspace_bytes(max_seqs) must hold the decode partials for any batch of up to
  // max_seqs decodes at any length: run the largest batch against a workspace of exactly that
  // size, surrounded by guard bytes that must stay untouched.
  std::mt19937 rng(410);
  for (const auto& h : {kHeads[0], kHeads[4], kHeads[6]})
    for (int d : {64, 128})
      for (int B : {1, 5, 64}) {
        SCOPED_TRACE(::testing::Message() << "B " << B << " Hq " << h[0] << " D " << d);
        std::vector<SeqSpec> seqs;
        // Lengths past 64 * 64 keys allow the most splits (small batches); big batches get few.
        for (int b = 0; b < B; ++b) seqs.push_back({1, b % 2 ? (B > 8 ? 300 : 4100) : 65});
        AttnProblem P = make_attn_problem(rng, seqs, B, h[0], h[1], d, act);
        const std::vector<float> want = cpu_attention(*cpu, P);
        GpuAttn g;
        g.upload(*gpu, P, act);
        const size_t ws = gpu->attention_workspace_bytes(B, h[0], d), guard = 4096;
        Buffer big = gpu->alloc(ws + 2 * guard);
        std::vector<uint8_t> pattern(ws + 2 * guard, 0xA5);
        gpu->copy_to_device(big.data(), pattern.data(), pattern.size());
        g.meta.workspace = big.as<uint8_t>() + guard;
        const std::vector<float> got = g.run(*gpu, P);
        ASSERT_TRUE(check_attn(got, want, P, act, AttnFill::Random));
        std::vector<uint8_t> after(pattern.size());
        gpu->copy_to_host(after.data(), big.data(), after.size());
        for (size_t i = 0; i < guard; ++i) {
          ASSERT_EQ(after[i], 0xA5) << "workspace underrun at -" << guard - i;
          ASSERT_EQ(after[guard + ws + i], 0xA5) << "workspace overrun at +" << i;
        }
      }
}

LL_INSTANTIATE_DTYPES(CudaAttention);

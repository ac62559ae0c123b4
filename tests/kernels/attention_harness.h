// One attention problem (packed batch, K/V pools with scattered slots, request->slot table) set
// up identically on the CPU (F32 pools) and the CUDA backend (act pools of the same values),
// shared by the attention and CUDA-graph tests.
#pragma once
#include "kernels/cuda_test_util.h"

namespace lite_llama::kt {

struct SeqSpec {
  int q_len, seq_len;  // seq_len - q_len keys are already in the pool (the chunk's prefix)
};

enum class AttnFill {
  Random,  // q, k, v ~ N(0, 1) rounded to act: scores ~ N(0, 1) after the 1/sqrt(D) scale
  // k = 0, so every visible key has weight exactly 1 on both sides (exp(0), no P rounding
  // error in bf16), and v is 1 at one dimension of selected "probe" keys, 0 elsewhere: the
  // output is (visible probes of that dimension) / (visible keys), exact in fp32. A key lost or
  // added at a split, tile or causal boundary changes a probe count by one.
  ExactProbes,
};

struct AttnProblem {
  int hq = 0, hkv = 0, d = 0;
  std::vector<SeqSpec> seqs;
  int num_decode = 0;  // leading sequences passed as decode (q_len must be 1)
  int T = 0, num_slots = 0, max_reqs = 0, stride = 0, max_q = 0, max_seq = 0;
  std::vector<float> q, k, v;  // [T, hq, d], [num_slots, hkv, d] x 2
  std::vector<int32_t> req_to_slot, b_q_start, b_q_len, b_seq_len, b_req_idx;
  int64_t kvrow() const { return int64_t(hkv) * d; }
};

// Split and tile boundaries where a split-KV or tiled kernel could lose or repeat a key: the
// first/last two keys, the first and last key of every 64-key block (tiles, keys per pass), and
// of every split k * ceil(n / s) for split counts s <= 64.
inline bool is_boundary(int j, int n) {
  if (j <= 1 || j >= n - 2) return true;
  if (j % 64 == 0 || (j + 1) % 64 == 0) return true;
  for (int s = 2; s <= 64; ++s) {
    const int per = (n + s - 1) / s;
    if (j % per == 0 || (j + 1) % per == 0) return true;
  }
  return false;
}

inline uint32_t mix32(uint32_t h) {
  h ^= h >> 16;
  h *= 0x7feb352du;
  h ^= h >> 15;
  h *= 0x846ca68bu;
  h ^= h >> 16;
  return h;
}

// Builds the problem. `stride_extra` widens each request row of req_to_slot (entries beyond a
// sequence's length hold -1, so any read past seq_len faults or shows up).
inline AttnProblem make_attn_problem(std::mt19937& rng, const std::vector<SeqSpec>& seqs,
                                     int num_decode, int hq, int hkv, int d, DType act,
                                     AttnFill fill = AttnFill::Random, int stride_extra = 5) {
  AttnProblem P;
  P.hq = hq, P.hkv = hkv, P.d = d, P.seqs = seqs, P.num_decode = num_decode;
  const int B = int(seqs.size());
  int total_kv = 0;
  for (const SeqSpec& s : seqs) {
    total_kv += s.seq_len;
    P.T += s.q_len;
    P.max_q = std::max(P.max_q, s.q_len);
    P.max_seq = std::max(P.max_seq, s.seq_len);
  }
  for (int b = 0; b < num_decode; ++b) EXPECT_EQ(seqs[size_t(b)].q_len, 1) << "decode seq " << b;
  P.num_slots = total_kv + 37;
  P.max_reqs = B + 3;
  P.stride = P.max_seq + stride_extra;
  const std::vector<int32_t> perm = distinct(rng, P.num_slots, P.num_slots);  // scattered slots
  const std::vector<int32_t> rows = distinct(rng, P.max_reqs, B);             // shuffled rows
  P.req_to_slot.assign(size_t(P.max_reqs) * size_t(P.stride), -1);
  const int64_t kvrow = P.kvrow();
  P.q = rand_act(rng, size_t(P.T) * size_t(hq) * size_t(d), act);
  if (fill == AttnFill::Random) {
    P.k = rand_act(rng, size_t(P.num_slots * kvrow), act);
    P.v = rand_act(rng, size_t(P.num_slots * kvrow), act);
  } else {
    P.k.assign(size_t(P.num_slots * kvrow), 0.0f);
    P.v.assign(size_t(P.num_slots * kvrow), 0.0f);
  }
  std::uniform_int_distribution<int> coin(0, 15);
  int next = 0, tok = 0;
  for (int b = 0; b < B; ++b) {
    const SeqSpec& s = seqs[size_t(b)];
    P.b_q_start.push_back(tok);
    P.b_q_len.push_back(s.q_len);
    P.b_seq_len.push_back(s.seq_len);
    P.b_req_idx.push_back(rows[size_t(b)]);
    for (int j = 0; j < s.seq_len; ++j) {
      const int32_t slot = perm[size_t(next++)];
      P.req_to_slot[size_t(rows[size_t(b)]) * size_t(P.stride) + size_t(j)] = slot;
      if (fill != AttnFill::ExactProbes) continue;
      // Short sequences: every key is a probe, in every KV head. Long ones: the boundaries and
      // 1 key in 16, each in one KV head only (splits are the same for every head), so that no
      // dimension counts so many probes that one more or less hides under the rounding.
      const bool dense = s.seq_len <= 2048, edge = j <= 1 || j >= s.seq_len - 2;
      if (!dense && !is_boundary(j, s.seq_len) && coin(rng) != 0) continue;
      for (int g = 0; g < hkv; ++g) {
        if (!dense && !edge && int(mix32(uint32_t(j)) % uint32_t(hkv)) != g) continue;
        const int dim = int(mix32(uint32_t(j * 131 + g * 17 + b * 7919)) % uint32_t(d));
        P.v[size_t(slot * kvrow + g * d + dim)] = 1.0f;
      }
    }
    tok += s.q_len;
  }
  return P;
}

// Gives sequence b's keys [0, runs[b]) the contiguous slots base_b + i (the runs packed from slot
// 0), swapping slot numbers, with their K/V rows, with the keys that held them: every key keeps
// its values. Returns the problem's b_kv_runs ([B][2]: base, length).
inline std::vector<int32_t> make_kv_runs(AttnProblem& P, const std::vector<int>& runs) {
  std::vector<int64_t> where(size_t(P.num_slots), -1);  // slot -> its entry of req_to_slot
  for (size_t i = 0; i < P.req_to_slot.size(); ++i)
    if (P.req_to_slot[i] >= 0) where[size_t(P.req_to_slot[i])] = int64_t(i);
  const size_t row = size_t(P.kvrow());
  std::vector<int32_t> out;
  int32_t next = 0;
  for (size_t b = 0; b < P.seqs.size(); ++b) {
    const int32_t base = next, r = runs[b];
    next += r;
    for (int32_t j = 0; j < r; ++j) {
      const int64_t e = int64_t(P.b_req_idx[b]) * P.stride + j;
      const int32_t c = P.req_to_slot[size_t(e)], t = base + j;
      if (c == t) continue;
      const int64_t other = where[size_t(t)];
      P.req_to_slot[size_t(e)] = t;
      if (other >= 0) P.req_to_slot[size_t(other)] = c;
      where[size_t(t)] = e, where[size_t(c)] = other;
      std::swap_ranges(P.k.begin() + long(size_t(c) * row), P.k.begin() + long(size_t(c + 1) * row),
                       P.k.begin() + long(size_t(t) * row));
      std::swap_ranges(P.v.begin() + long(size_t(c) * row), P.v.begin() + long(size_t(c + 1) * row),
                       P.v.begin() + long(size_t(t) * row));
    }
    out.push_back(r > 0 ? base : 0);
    out.push_back(r);
  }
  return out;
}

// The CPU backend's result [T, hq, d].
inline std::vector<float> cpu_attention(ops::Backend& cpu, AttnProblem& P) {
  ops::AttnMeta m;
  m.num_seqs = int(P.seqs.size());
  m.num_tokens = P.T;
  m.num_decode_seqs = P.num_decode;
  m.max_q_len = P.max_q;
  m.max_seq_len = P.max_seq;
  m.b_q_start = P.b_q_start.data();
  m.b_q_len = P.b_q_len.data();
  m.b_seq_len = P.b_seq_len.data();
  m.b_req_idx = P.b_req_idx.data();
  m.req_to_slot = P.req_to_slot.data();
  m.req_stride = P.stride;
  std::vector<float> out(P.q.size(), NAN);
  const ops::KvLayer kv{host_f32(P.k, {P.num_slots, P.hkv, P.d}),
                        host_f32(P.v, {P.num_slots, P.hkv, P.d})};
  cpu.attention(host_f32(P.q, {P.T, P.hq, P.d}), kv, m, P.hq, P.hkv, P.d,
                1.0f / std::sqrt(float(P.d)), host_f32(out, {P.T, P.hq, P.d}));
  return out;
}

// The problem's buffers on the device; the metadata can be re-uploaded (CUDA graph replays).
struct GpuAttn {
  DevTensor k, v, q, out;
  DevInts q_start, q_len, seq_len, req_idx, req_to_slot, kv_runs;
  Buffer workspace;
  ops::AttnMeta meta;

  void upload(ops::Backend& gpu, const AttnProblem& P, DType act, int max_seqs_for_ws = 0) {
    k = dev_from(gpu, P.k, act, {P.num_slots, P.hkv, P.d});
    v = dev_from(gpu, P.v, act, {P.num_slots, P.hkv, P.d});
    q = dev_from(gpu, P.q, act, {P.T, P.hq, P.d});
    out = dev_alloc(gpu, act, {P.T, P.hq, P.d});
    q_start = dev_ints(gpu, P.b_q_start);
    q_len = dev_ints(gpu, P.b_q_len);
    seq_len = dev_ints(gpu, P.b_seq_len);
    req_idx = dev_ints(gpu, P.b_req_idx);
    req_to_slot = dev_ints(gpu, P.req_to_slot);
    const int max_seqs = std::max(max_seqs_for_ws, int(P.seqs.size()));
    workspace = gpu.alloc(std::max<size_t>(gpu.attention_workspace_bytes(max_seqs, P.hq, P.d), 16));
    meta = ops::AttnMeta{};
    meta.num_seqs = int(P.seqs.size());
    meta.num_tokens = P.T;
    meta.num_decode_seqs = P.num_decode;
    meta.max_q_len = P.max_q;
    meta.max_seq_len = P.max_seq;
    meta.b_q_start = q_start.ptr();
    meta.b_q_len = q_len.ptr();
    meta.b_seq_len = seq_len.ptr();
    meta.b_req_idx = req_idx.ptr();
    meta.req_to_slot = req_to_slot.ptr();
    meta.req_stride = P.stride;
    meta.workspace = workspace.data();
  }
  // The sequences' contiguous runs (make_kv_runs), and the slot table the device reads instead of
  // the problem's (the CPU reference keeps that one).
  void set_runs(ops::Backend& gpu, const std::vector<int32_t>& runs, const std::vector<int32_t>& table) {
    kv_runs = dev_ints(gpu, runs);
    req_to_slot = dev_ints(gpu, table);
    meta.b_kv_runs = kv_runs.ptr();
    meta.req_to_slot = req_to_slot.ptr();
  }
  // Enqueues the op (no poisoning, no sync): what a captured graph records.
  void enqueue(ops::Backend& gpu, const AttnProblem& P) {
    gpu.attention(q.t, ops::KvLayer{k.t, v.t}, meta, P.hq, P.hkv, P.d, 1.0f / std::sqrt(float(P.d)),
                  out.t);
  }
  std::vector<float> run(ops::Backend& gpu, const AttnProblem& P) {
    poison(gpu, out.t);
    enqueue(gpu, P);
    return to_host(gpu, out.t);
  }
};

// Per (token, head) rows of d: random data -> act_tol (one output rounding, plus in the prefill
// kernel the rounding of P to act before P.V, ~u relative to the output as well); exact probes
// -> |got - want| <= 1.01 u |want| (the device rounds the exact fp32 ratio once; the CPU's fp32
// division is within 1e-7), so a zero must stay exactly zero.
inline ::testing::AssertionResult check_attn(const std::vector<float>& got,
                                             const std::vector<float>& want, const AttnProblem& P,
                                             DType act, AttnFill fill) {
  if (got.size() != want.size()) return ::testing::AssertionFailure() << "size mismatch";
  const size_t d = size_t(P.d);
  for (size_t b = 0; b < P.seqs.size(); ++b) {
    for (int i = 0; i < P.seqs[b].q_len; ++i) {
      const size_t t = size_t(P.b_q_start[b] + i);
      for (int h = 0; h < P.hq; ++h) {
        const size_t off = (t * size_t(P.hq) + size_t(h)) * d;
        ::testing::AssertionResult r = ::testing::AssertionSuccess();
        if (fill == AttnFill::Random) {
          r = close(got.data() + off, want.data() + off, d, act_tol(act));
        } else {
          const double u = unit_roundoff(act);
          for (size_t e = 0; e < d && r; ++e) {
            const double g = got[off + e], w = want[off + e];
            if (!(std::fabs(g - w) <= 1.01 * u * std::fabs(w)))
              r = ::testing::AssertionFailure()
                  << "dim " << e << ": got " << g << " want " << w << " (= "
                  << std::lround(w * (P.b_seq_len[b] - P.seqs[b].q_len + i + 1)) << " probes / "
                  << (P.b_seq_len[b] - P.seqs[b].q_len + i + 1) << " keys)";
          }
        }
        if (!r)
          return ::testing::AssertionFailure()
                 << "seq " << b << (int(b) < P.num_decode ? " (decode" : " (prefill") << ", q_len "
                 << P.seqs[b].q_len << ", seq_len " << P.b_seq_len[b] << ") query " << i
                 << " head " << h << ": " << r.message();
      }
    }
  }
  return ::testing::AssertionSuccess();
}

}  // namespace lite_llama::kt

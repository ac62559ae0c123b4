#include "backends/cpu/cpu_attention.h"

#include <algorithm>
#include <atomic>
#include <cmath>

namespace lite_llama::cpu {
namespace {

constexpr int kQueryChunk = 16;    // query tokens per prefill item
constexpr int kMinSplitKeys = 256; // a key range worth a work item of its own
constexpr int kMaxItemFloats = 512; // K/V floats of a slot row one item reads (one-token items)

// Merges the partials of one (sequence, KV heads, query chunk): o = sum_s e^(m_s - M) O_s / L.
// Rows are ordered (token, query head of the item's heads), rpt of them per token.
void merge(const AttnItem* parts, int n, const AttnScratch& s, int rows, int D, int rpt,
           int head0, int q_start, int num_heads, float* out) {
  for (int r = 0; r < rows; ++r) {
    float mx = -INFINITY;
    for (int p = 0; p < n; ++p) mx = std::max(mx, s.partials[size_t(parts[p].partial) + size_t(rows) * D + r]);
    float* o = out + (int64_t(q_start + parts[0].q0 + r / rpt) * num_heads + head0 + r % rpt) * D;
    std::fill(o, o + D, 0.f);
    float l = 0;
    for (int p = 0; p < n; ++p) {
      const float* base = s.partials.data() + parts[p].partial;
      const float mp = base[size_t(rows) * D + r], lp = base[size_t(rows) * D + rows + r];
      if (lp == 0) continue;
      const float w = std::exp(mp - mx);
      l += w * lp;
      for (int d = 0; d < D; ++d) o[d] += w * base[size_t(r) * D + d];
    }
    const float inv = l > 0 ? 1.0f / l : 0.0f;
    for (int d = 0; d < D; ++d) o[d] *= inv;
  }
}

// KV heads per one-token item: the most (a divisor of num_kv_heads, slot row parts of at most
// kMaxItemFloats) that still leaves every thread an item.
int heads_per_token_item(int num_kv_heads, int D, int group, int threads, int other_items, int token_ranges) {
  for (int h = num_kv_heads; h > 1; --h)
    if (num_kv_heads % h == 0 && h * D <= kMaxItemFloats && h * group <= 4 * kAttnKeyTile &&
        other_items + token_ranges * (num_kv_heads / h) >= threads)
      return h;
  return 1;
}

}  // namespace

void attention_f32(ThreadPool& pool, const Kernels& k, const Tensor& q, const ops::KvLayer& kv,
                   const ops::AttnMeta& m, int num_heads, int num_kv_heads, int head_dim,
                   float scale, Tensor out, AttnScratch& s) {
  const int group = num_heads / num_kv_heads, D = head_dim;
  // Query chunks first; then, while there are fewer items than 4 per thread, key ranges of at
  // least kMinSplitKeys keys.
  int base_items = 0;
  for (int b = 0; b < m.num_seqs; ++b)
    base_items += num_kv_heads * ((m.b_q_len[b] + kQueryChunk - 1) / kQueryChunk);
  const int want = 4 * pool.size();
  // The splits (and so every row's arithmetic) stay those of one item per KV head; a one-token
  // chunk's items may then take several heads each.
  std::vector<int>& splits = s.splits;
  splits.assign(size_t(m.num_seqs), 1);
  int other_items = 0, token_ranges = 0;
  for (int b = 0; b < m.num_seqs; ++b) {
    const int ql = m.b_q_len[b], sl = m.b_seq_len[b];
    if (base_items < want) splits[size_t(b)] = std::clamp(want / std::max(1, base_items), 1, std::max(1, sl / kMinSplitKeys));
    const int per = (sl + splits[size_t(b)] - 1) / splits[size_t(b)], ranges = (sl + per - 1) / std::max(1, per);
    const int chunks = (ql + kQueryChunk - 1) / kQueryChunk, lone = ql % kQueryChunk == 1;
    other_items += num_kv_heads * (chunks - lone) * ranges;
    token_ranges += lone * ranges;
  }
  const int hpi = heads_per_token_item(num_kv_heads, D, group, pool.size(), other_items, token_ranges);
  s.items.clear();
  size_t partial_floats = 0;
  for (int b = 0; b < m.num_seqs; ++b) {
    const int ql = m.b_q_len[b], sl = m.b_seq_len[b];
    const int per = (sl + splits[size_t(b)] - 1) / splits[size_t(b)];
    for (int q0 = 0; q0 < ql; q0 += kQueryChunk) {
      const int q1 = std::min(ql, q0 + kQueryChunk), heads = q1 - q0 == 1 ? hpi : 1;
      const int rows = (q1 - q0) * group * heads;
      for (int g = 0; g < num_kv_heads; g += heads)
        for (int k0 = 0; k0 < sl; k0 += per) {
          AttnItem it{b, g, q0, q1, k0, std::min(sl, k0 + per)};
          it.heads = heads;
          if (splits[size_t(b)] > 1) {
            it.partial = int64_t(partial_floats);
            partial_floats += size_t(rows) * (D + 2);
          }
          s.items.push_back(it);
        }
    }
  }
  if (s.partials.size() < partial_floats) s.partials.resize(partial_floats);
  // Later query chunks see more keys: take them first, so the threads finish together.
  std::stable_sort(s.items.begin(), s.items.end(),
                   [](const AttnItem& a, const AttnItem& b) { return a.q0 > b.q0; });
  std::atomic<size_t> next{0};
  pool.run([&](int, int) {
    thread_local std::vector<float> scratch;
    const size_t need = attn_scratch_floats(std::max(kQueryChunk, hpi) * group, D, hpi);
    if (scratch.size() < need) scratch.resize(need);
    for (size_t i; (i = next.fetch_add(1, std::memory_order_relaxed)) < s.items.size();) {
      const AttnItem& it = s.items[i];
      const int rows = (it.q1 - it.q0) * group * it.heads;
      AttnTile t{};
      t.q = q.ptr<float>() + int64_t(m.b_q_start[it.b]) * num_heads * D;
      t.o = out.ptr<float>() + int64_t(m.b_q_start[it.b]) * num_heads * D;
      t.q_row_stride = int64_t(num_heads) * D;
      t.k = kv.k.data;
      t.v = kv.v.data;
      t.kv_f16 = kv.k.dtype == DType::F16;
      t.kv_row_stride = int64_t(num_kv_heads) * D;
      t.kv_offset = int64_t(it.g) * D;
      t.slots = m.req_to_slot + int64_t(m.b_req_idx[it.b]) * m.req_stride;
      t.head_dim = D;
      t.group = group;
      t.kv_heads = it.heads;
      t.head0 = it.g * group;
      t.q0 = it.q0;
      t.q1 = it.q1;
      t.first_pos = m.b_seq_len[it.b] - m.b_q_len[it.b];
      t.k0 = it.k0;
      t.k1 = it.k1;
      t.scale = scale;
      t.scratch = scratch.data();
      if (it.partial >= 0) {
        float* p = s.partials.data() + it.partial;
        t.o = p;
        t.m_out = p + size_t(rows) * D;
        t.l_out = t.m_out + rows;
      }
      k.attend(t);
    }
  });
  // Merge the partials of each (sequence, KV head, query chunk); they are adjacent by k0 order
  // within one chunk before the sort, so group them again by key.
  std::vector<AttnItem> parts;
  for (size_t i = 0; i < s.items.size(); ++i) {
    const AttnItem& it = s.items[i];
    if (it.partial < 0 || it.k0 != 0) continue;
    parts.clear();
    for (const AttnItem& o : s.items)
      if (o.partial >= 0 && o.b == it.b && o.g == it.g && o.q0 == it.q0) parts.push_back(o);
    merge(parts.data(), int(parts.size()), s, (it.q1 - it.q0) * group * it.heads, D, group * it.heads,
          it.g * group, m.b_q_start[it.b], num_heads, out.ptr<float>());
  }
}

}  // namespace lite_llama::cpu

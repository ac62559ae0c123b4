#include "backends/cpu/cpu_attention.h"

#include <algorithm>
#include <atomic>
#include <cmath>

namespace lite_llama::cpu {
namespace {

constexpr int kQueryChunk = 16;    // query tokens per prefill item
constexpr int kMinSplitKeys = 256; // a key range worth a work item of its own

// Merges the partials of one (sequence, KV head, query chunk): o = sum_s e^(m_s - M) O_s / L.
void merge(const AttnItem* parts, int n, const AttnScratch& s, int rows, int D, int group,
           int q_start, int num_heads, float* out) {
  for (int r = 0; r < rows; ++r) {
    float mx = -INFINITY;
    for (int p = 0; p < n; ++p) mx = std::max(mx, s.partials[size_t(parts[p].partial) + size_t(rows) * D + r]);
    float* o = out + (int64_t(q_start + parts[0].q0 + r / group) * num_heads + parts[0].g * group + r % group) * D;
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
  s.items.clear();
  size_t partial_floats = 0;
  for (int b = 0; b < m.num_seqs; ++b) {
    const int ql = m.b_q_len[b], sl = m.b_seq_len[b];
    int splits = 1;
    if (base_items < want) splits = std::clamp(want / std::max(1, base_items), 1, std::max(1, sl / kMinSplitKeys));
    const int per = (sl + splits - 1) / splits;
    for (int g = 0; g < num_kv_heads; ++g)
      for (int q0 = 0; q0 < ql; q0 += kQueryChunk) {
        const int q1 = std::min(ql, q0 + kQueryChunk), rows = (q1 - q0) * group;
        for (int k0 = 0; k0 < sl; k0 += per) {
          AttnItem it{b, g, q0, q1, k0, std::min(sl, k0 + per)};
          if (splits > 1) {
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
    if (scratch.size() < attn_scratch_floats(kQueryChunk * group, D))
      scratch.resize(attn_scratch_floats(kQueryChunk * group, D));
    for (size_t i; (i = next.fetch_add(1, std::memory_order_relaxed)) < s.items.size();) {
      const AttnItem& it = s.items[i];
      const int rows = (it.q1 - it.q0) * group;
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
    merge(parts.data(), int(parts.size()), s, (it.q1 - it.q0) * group, D, group,
          m.b_q_start[it.b], num_heads, out.ptr<float>());
  }
}

}  // namespace lite_llama::cpu

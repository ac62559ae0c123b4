#include "backends/cpu/cpu_attention.h"

#include <algorithm>
#include <cmath>

#include "backends/cpu/vec_dot.h"

namespace lite_llama::cpu {

void attention_f32(ThreadPool& pool, const Tensor& q, const ops::KvLayer& kv, const ops::AttnMeta& m,
                   int num_heads, int num_kv_heads, int head_dim, float scale, Tensor out,
                   std::vector<AttnItem>& items) {
  const int group = num_heads / num_kv_heads;
  const int64_t kv_row = int64_t(num_kv_heads) * head_dim;
  // Work items: (sequence, head, query chunk) so that both decode batches and one long
  // prefill spread across threads.
  items.clear();
  for (int b = 0; b < m.num_seqs; ++b) {
    int ql = m.b_q_len[b];
    int chunk = std::max(1, std::min(ql, 64));
    for (int h = 0; h < num_heads; ++h)
      for (int q0 = 0; q0 < ql; q0 += chunk) items.push_back({b, h, q0, std::min(ql, q0 + chunk)});
  }
  pool.parallel_for(int64_t(items.size()), [&](int64_t ib, int64_t ie) {
    std::vector<float> scores;
    std::vector<float> acc(static_cast<size_t>(head_dim));
    for (int64_t it = ib; it < ie; ++it) {
      const AttnItem& w = items[size_t(it)];
      const int seq_len = m.b_seq_len[w.b], q_len = m.b_q_len[w.b];
      const int32_t* slots = m.req_to_slot + int64_t(m.b_req_idx[w.b]) * m.req_stride;
      const int g = w.h / group;
      const float* kbase = kv.k.ptr<float>() + g * head_dim;
      const float* vbase = kv.v.ptr<float>() + g * head_dim;
      for (int i = w.q0; i < w.q1; ++i) {
        const int64_t tok = m.b_q_start[w.b] + i;
        const float* qv = q.ptr<float>() + (tok * num_heads + w.h) * head_dim;
        const int visible = seq_len - q_len + i + 1;  // causal: keys at positions <= query's
        if (int(scores.size()) < visible) scores.resize(size_t(visible));
        float mx = -INFINITY;
        for (int j = 0; j < visible; ++j) {
          float s = vec_dot(DType::F32, kbase + int64_t(slots[j]) * kv_row, qv, head_dim) * scale;
          scores[size_t(j)] = s;
          mx = std::max(mx, s);
        }
        float sum = 0;
        for (int j = 0; j < visible; ++j) sum += (scores[size_t(j)] = std::exp(scores[size_t(j)] - mx));
        std::fill(acc.begin(), acc.end(), 0.f);
        for (int j = 0; j < visible; ++j) {
          const float p = scores[size_t(j)];
          const float* vr = vbase + int64_t(slots[j]) * kv_row;
          for (int d = 0; d < head_dim; ++d) acc[size_t(d)] += p * vr[d];
        }
        float* o = out.ptr<float>() + (tok * num_heads + w.h) * head_dim;
        const float inv = 1.f / sum;
        for (int d = 0; d < head_dim; ++d) o[d] = acc[size_t(d)] * inv;
      }
    }
  });
}

}  // namespace lite_llama::cpu

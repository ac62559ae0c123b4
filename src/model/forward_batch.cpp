#include "model/forward_batch.h"

#include <algorithm>

namespace lite_llama {

void ForwardBatch::clear() {
  for (auto* v : {&t_token_ids, &t_positions, &t_slots, &t_req_idx, &b_q_start, &b_q_len,
                  &b_seq_len, &b_req_idx, &b_kv_runs, &logit_rows})
    v->clear();
  num_decode_seqs = 0;
}

void ForwardBatch::add_sequence(int req_idx, const int32_t* tokens, int n, int start_pos,
                                const int32_t* slots, bool want_logits, int32_t run_slot, int32_t run_len) {
  run_len = std::clamp(run_len, 0, start_pos + n);
  b_kv_runs.push_back(run_len > 0 ? run_slot : 0);
  b_kv_runs.push_back(run_len);
  b_q_start.push_back(num_tokens());
  b_q_len.push_back(n);
  b_seq_len.push_back(start_pos + n);
  b_req_idx.push_back(req_idx);
  for (int i = 0; i < n; ++i) {
    t_token_ids.push_back(tokens[i]);
    t_positions.push_back(start_pos + i);
    t_slots.push_back(slots[i]);
    t_req_idx.push_back(req_idx);
  }
  if (want_logits) logit_rows.push_back(num_tokens() - 1);
  if (n == 1 && num_decode_seqs == num_seqs() - 1) ++num_decode_seqs;
}

}  // namespace lite_llama

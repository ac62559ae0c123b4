// One step's work on the host: the engine's BatchBuilder fills it from integers only.
// Packed ("nopad"): sequence b owns tokens [b_q_start[b], b_q_start[b] + b_q_len[b]).
#pragma once
#include <cstdint>
#include <vector>

namespace lite_llama {

struct ForwardBatch {
  std::vector<int32_t> t_token_ids;  // [T]
  std::vector<int32_t> t_positions;  // [T] position of the token in its sequence
  std::vector<int32_t> t_slots;      // [T] KV pool slot the token's K/V go to
  std::vector<int32_t> t_req_idx;    // [T] request-table row of the token's sequence
  std::vector<int32_t> b_q_start;    // [B]
  std::vector<int32_t> b_q_len;      // [B]
  std::vector<int32_t> b_seq_len;    // [B] KV length after this step
  std::vector<int32_t> b_req_idx;    // [B]
  std::vector<int32_t> b_kv_runs;    // [B][2] (slot s, keys n): keys i < n at slots s + i
  std::vector<int32_t> logit_rows;   // token rows whose logits are wanted (usually last of each)
  int num_decode_seqs = 0;           // leading sequences with q_len == 1

  int num_tokens() const { return int(t_token_ids.size()); }
  int num_seqs() const { return int(b_q_len.size()); }
  void clear();
  // Appends one sequence's chunk; `slots` are the KV slots of its new tokens. Its keys i <
  // run_len (after this chunk's) are at slots run_slot + i, if the caller knows such a run
  // (Sequence::leading_run); attention may then skip the slot table for them.
  void add_sequence(int req_idx, const int32_t* tokens, int n, int start_pos, const int32_t* slots,
                    bool want_logits, int32_t run_slot = 0, int32_t run_len = 0);
};

}  // namespace lite_llama

// The one Llama-family decoder, written against ops::Backend. Buffers are sized at construction
// for the largest step (max_tokens, max_seqs); a step allocates nothing.
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

#include "model/forward_batch.h"
#include "model/kv_cache.h"
#include "model/model_config.h"
#include "model/tp_shard.h"
#include "model/weights.h"
#include "ops/ops.h"

namespace lite_llama {

// Host-side sizes of a staged step (what launch shapes depend on).
struct StepShape {
  int num_tokens = 0;
  int num_seqs = 0;
  int num_logits = 0;
  int num_decode_seqs = 0;
  int max_q_len = 0;
  int max_seq_len = 0;
  int max_prefill_seq_len = 0;  // the longest sequence with q_len > 1 (0: none)
};

class Decoder {
 public:
  // Buffers for steps of up to max_tokens tokens / max_seqs sequences and positions < max_ctx.
  // Under tensor parallelism `cfg` is the rank's (shard_config) and `weights` its shard; every
  // rank runs the same calls, and the logits of rank 0 hold the whole vocabulary.
  Decoder(const ModelConfig& cfg, Weights weights, ops::Backend& backend, int max_tokens,
          int max_seqs, int max_ctx, TpShard shard = {});
  // The KV pool is sized from the memory left after the decoder's buffers, so it comes later.
  void set_kv_cache(KvCache* kv) { kv_ = kv; }
  const KvCache* kv_cache() const { return kv_; }

  // stage() validates the batch and copies its metadata to the device; run() enqueues the
  // forward pass on the staged metadata and returns logits [num_logits, V] (F32, on device).
  // A CUDA graph captures run() once per decode batch size and replays it after each stage().
  StepShape stage(const ForwardBatch& batch);
  Tensor run(const StepShape& shape);
  Tensor forward(const ForwardBatch& batch) { return run(stage(batch)); }
  // The logits [n, V] of token rows [first, first + n) of the last run(), whatever its logit rows
  // (n <= max_seqs): scoring takes every position of a long chunk this way, a slice at a time. A
  // row once only (its final residual add happens in place); every rank calls it, as run().
  Tensor token_logits(int first, int n);
  // Before decode steps of these batch sizes are captured: lets the backend time its choices for
  // the projections run() makes at those token counts (Backend::tune_linears), each group of
  // layers' weights of one shape together. Returns the choices made and changed.
  std::pair<int, int> tune_linears(const std::vector<int>& batch_sizes);
  // Writes the request-table entries of positions [start_pos, start_pos + n) of request row
  // req_row (slots[i] for position start_pos + i), outside a forward: the prefix a sequence took
  // from the prefix cache. Enqueued on the backend's stream, so the next forward sees it.
  void write_table(int32_t req_row, int32_t start_pos, const int32_t* slots, int n);

  const ModelConfig& config() const { return cfg_; }
  TpShard shard() const { return shard_; }
  const Weights& weights() const { return w_; }
  ops::Backend& backend() { return be_; }
  int max_tokens() const { return max_tokens_; }
  int max_seqs() const { return max_seqs_; }
  // Device bytes each token of max_tokens adds to the step buffers (activations of `act_bytes`
  // elements, the residual stream of `resid_bytes`, metadata): what a step budget costs before it
  // is allocated.
  static int64_t step_bytes_per_token(const ModelConfig& cfg, int64_t act_bytes, int64_t resid_bytes);
  size_t activation_bytes() const {
    return act_.size() + resid_.size() + meta_.size() + table_meta_.size() + logits_.size() + attn_ws_.size() +
           moe_.size() + lm_local_.size() + gather_ws_.size();
  }
  // The staged step's logits buffer ([max_seqs, logit_cols()] F32 on the device).
  Tensor logits_buffer() const;
  // A logits row's columns: the vocabulary, padded to a multiple of 4 on the GPU (columns past the
  // vocabulary hold 0 and are never sampled or scored).
  int64_t logit_cols() const { return logit_cols_; }

 private:
  Tensor act(size_t offset, int64_t rows, int64_t cols) const;
  Tensor resid(size_t offset, int64_t rows, int64_t cols) const;
  Tensor lm_local(int rows) const;
  Tensor head(Tensor xl, Tensor dl);
  // The dense MLP's intermediate size, 0 when every layer is sparse (no gate_up buffers).
  static int64_t dense_ffn(const ModelConfig& cfg);

  ModelConfig cfg_;
  TpShard shard_;
  int64_t vocab_rows_ = 0;  // the vocabulary shard's rows (the whole vocabulary on one rank)
  int64_t table_rows_ = 0;  // its embedding / LM head table's rows, with the zero rows
  int64_t logit_cols_ = 0;  // a logits row's columns (logit_cols())
  Weights w_;
  ops::Backend& be_;
  KvCache* kv_ = nullptr;
  int max_ctx_;
  int max_tokens_, max_seqs_;
  int last_tokens_ = 0;  // the last run()'s tokens (token_logits' bound)
  ops::RopeTable rope_;
  Buffer act_, resid_, meta_, logits_, attn_ws_;
  Buffer lm_local_, gather_ws_;  // tensor parallelism: this rank's logits [max_seqs, vocab table rows]
  Buffer moe_;  // MoE routes: experts [T, k] int32, weights [T, k] f32, then the experts' workspace
  size_t moe_ws_offset_ = 0;
  std::vector<int32_t> meta_host_;
  Buffer table_meta_;  // write_table's (row, position, slot) chunks: 3 x max_tokens
  std::vector<int32_t> table_host_;
  // Offsets (in elements of the act dtype) of the activation buffers inside act_.
  size_t off_h_, off_qkv_, off_q_, off_attn_, off_gu_, off_mlp_, off_hl_, off_router_;
  // Offsets (in elements of the backend's residual_dtype()) inside resid_: the residual stream
  // and the projections added to it ([max_tokens, H]), the logit rows' copies ([max_seqs, H]).
  size_t off_x_, off_o_, off_down_, off_xl_, off_dl_;
  // Offsets (int32 elements) of the metadata arrays inside meta_.
  size_t m_ids_, m_pos_, m_slots_, m_treq_, m_qstart_, m_qlen_, m_seqlen_, m_breq_, m_rows_, m_kvrun_;
};

}  // namespace lite_llama

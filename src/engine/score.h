// Teacher-forced scoring on the decoder directly (no scheduler): the engine's score().
#pragma once
#include <functional>
#include <vector>

#include "kv/kv_pool.h"
#include "lite_llama/engine.h"
#include "model/decoder.h"

namespace lite_llama {

struct ScoreContext {
  Decoder& decoder;  // rank 0's: the config, the backend the logits are read from
  std::function<Tensor(const ForwardBatch&)> forward;  // one forward on every rank
  // Logits of token rows [first, first + n) of the last forward (n <= max_seqs, every rank), so
  // that a prefill chunk of max_tokens tokens is scored max_seqs rows at a time.
  std::function<Tensor(int first, int n)> token_logits;
  kv::KvPool& pool;
  kv::ReqRows& rows;
  int max_tokens;   // per forward step
  int max_seqs;     // logit rows per step
  int vocab_limit;  // columns past this are padding
  // Called for each sequence once all of its K/V are in `slots`, before they are given back: the
  // engine caches a scored prompt's, or takes them out of `slots` (those are then not given back),
  // so that its generation skips that prefill.
  std::function<void(size_t seq, std::vector<int32_t>& slots)> on_scored = {};
};

std::vector<ScoreResult> score_sequences(ScoreContext& c, const std::vector<std::vector<int32_t>>& seqs,
                                         int decode_tail, const LogitsSink& sink, int top_k = -1);

}  // namespace lite_llama

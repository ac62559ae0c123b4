// Megatron-style tensor parallelism: which part of each weight rank r of n holds. Q/K/V and
// gate/up are split by output rows (heads, MLP columns: column-parallel), O and down by input
// columns (row-parallel: each rank's product is a partial sum, all-reduced), the embedding and
// the LM head by vocabulary rows. KV heads fewer than the ranks are replicated.
#pragma once
#include <cstdint>
#include <vector>

#include "core/tensor.h"
#include "model/arch.h"
#include "model/model_config.h"

namespace lite_llama {

struct TpShard {
  int rank = 0;
  int size = 1;
  bool active() const { return size > 1; }
};

// One-line errors where the config does not split over n ranks (heads, KV heads, MLP, experts).
void check_tp(const ModelConfig& cfg, int n);
// The shapes one rank computes: its query heads, KV heads and MLP columns; vocab_size stays the
// whole vocabulary (token ids and the gathered logits use it).
ModelConfig shard_config(const ModelConfig& cfg, TpShard s);
// Vocabulary rows of each rank's embedding / LM head shard: ceil(V / n). The shard's table has
// zero rows after them (vocab_table_rows in all, a multiple of 64 so that the local logits keep
// aligned rows for cuBLASLt): token ids of other ranks' rows are looked up in the first, so the
// all-reduce of the embedding sums one real row and zeros.
int64_t vocab_shard_rows(int64_t vocab, int n);
int64_t vocab_table_rows(int64_t vocab, int n);

// The rank's part of a full (host, or data == nullptr for dummy) weight of `role`, whose full
// shape the caller has checked. Row splits are views; column splits and the vocabulary's zero row
// are host copies kept in `keep`.
Tensor shard_weight(const ModelConfig& full, TpShard s, WeightRole role, const Tensor& t,
                    const std::string& name, std::vector<Buffer>& keep);

}  // namespace lite_llama

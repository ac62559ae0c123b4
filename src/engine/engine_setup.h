// Engine construction past the files and the backend: the weights, the sizes the options leave
// open (context, sequences, token budget, the KV pool from the memory left), the decoder and its
// KV cache; and the ModelInfo of the result. Apart from EngineImpl, which handles requests.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "engine/model_files.h"
#include "engine/rank_group.h"
#include "lite_llama/engine.h"
#include "model/decoder.h"
#include "model/kv_cache.h"
#include "ops/ops.h"

namespace lite_llama {

struct LoadedModel {
  std::unique_ptr<KvCache> kv;
  std::unique_ptr<Decoder> decoder;  // declared after kv: destroyed first
  int ctx = 0;                 // tokens per sequence at most (cut to the KV pool if smaller)
  int max_seqs = 0;            // sequences per step
  int max_batched_tokens = 0;  // tokens per step
  int64_t kv_tokens = 0, kv_bytes_per_token = 0;
};

// Every tensor-parallel rank's shard (backends[r] of rank r; `group` runs them at once): the
// same sizes on every rank, from the least memory any rank has left. Notes the device's weight
// dtype in files.weight_dtype where it differs from the file's.
std::vector<LoadedModel> load_model(const EngineOptions& o, ModelFiles& files,
                                    const std::vector<ops::Backend*>& backends, RankGroup& group);
ModelInfo make_model_info(const ModelFiles& files, const ops::Backend& backend,
                          const LoadedModel& m, double load_ms);

// The backends, models and threads of every tensor-parallel rank (one rank: no threads).
// Each rank's model and backend are freed on the thread that used them.
class RankModels {
 public:
  RankModels(const EngineOptions& o, const BackendOptions& bo, ModelFiles& files);
  ~RankModels();
  int size() const { return int(backends_.size()); }
  ops::Backend& backend(int rank = 0) const { return *backends_[size_t(rank)]; }
  LoadedModel& model(int rank = 0) { return models_[size_t(rank)]; }
  const LoadedModel& model(int rank = 0) const { return models_[size_t(rank)]; }
  RankGroup& group() { return *group_; }
  std::vector<Decoder*> decoders() const;

 private:
  std::vector<std::unique_ptr<ops::Backend>> backends_;
  std::unique_ptr<RankGroup> group_;
  std::vector<LoadedModel> models_;
};

}  // namespace lite_llama

// Engine construction past the files and the backend: the weights, the sizes the options leave
// open (context, sequences, token budget, the KV pool from the memory left), the decoder and its
// KV cache; and the ModelInfo of the result. Apart from EngineImpl, which handles requests.
#pragma once
#include <cstdint>
#include <memory>

#include "engine/model_files.h"
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

// Notes the device's weight dtype in files.weight_dtype where it differs from the file's.
LoadedModel load_model(const EngineOptions& o, ModelFiles& files, ops::Backend& backend);
ModelInfo make_model_info(const ModelFiles& files, const ops::Backend& backend,
                          const LoadedModel& m, double load_ms);

}  // namespace lite_llama

// Model weights as the backend computes with them, loaded through the arch table's tensor names
// from any WeightSource (a GGUF file, a safetensors directory or random "dummy" weights).
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "model/arch.h"
#include "model/model_config.h"
#include "model/tp_shard.h"
#include "ops/ops.h"

namespace lite_llama {

namespace gguf {
class File;
}

// Host tensors by name (row-major views into mapped files or owned buffers).
class WeightSource {
 public:
  virtual ~WeightSource() = default;
  virtual const std::string& path() const = 0;
  // nullptr when absent.
  virtual const Tensor* find(WeightRole role, int layer) const = 0;
  virtual std::string tensor_name(WeightRole role, int layer) const = 0;
  // One expert's matrix (WeightRole::Expert*) as a 2-D view: HF stores a tensor per expert,
  // GGUF one [E, rows, cols] tensor per layer and projection. nullopt when absent.
  virtual std::optional<Tensor> find_expert(WeightRole role, int layer, int expert) const = 0;
  virtual std::string expert_tensor_name(WeightRole role, int layer, int expert) const = 0;
};

namespace safetensors {
class Archive;
}

std::unique_ptr<WeightSource> gguf_weight_source(std::shared_ptr<const gguf::File> f);
// `quant`: the checkpoint's quantization_config; its layers are converted at construction.
std::unique_ptr<WeightSource> hf_weight_source(std::shared_ptr<const safetensors::Archive> a,
                                               const QuantConfig& quant = {});
// Random weights of the config's shapes: 2-D tensors come with data == nullptr (the backend
// fills them on its device); norms and biases get host values near 1 and 0.
std::unique_ptr<WeightSource> dummy_weight_source(const ModelConfig& cfg, uint64_t seed);

struct LayerWeights {
  Tensor attn_norm, ffn_norm;  // [H] F32
  Tensor q_norm, k_norm;       // [D] F32 (Qwen3) or empty
  ops::Linear qkv;             // [(Hq + 2 Hkv) D, H] (+ bias for Qwen2)
  ops::Linear o;               // [H, Hq D]
  ops::Linear gate_up;         // [2F, H]   (dense MLP layers)
  ops::Linear down;            // [H, F]
  bool moe = false;            // a sparse layer: router + experts instead of gate_up / down
  ops::Linear router;          // [E, H]
  ops::MoeExperts experts;
};

struct Weights {
  Tensor embed;                // [V, H]
  Tensor final_norm;           // [H] F32
  ops::Linear lm_head;         // [V, H] (the embedding when tied)
  std::vector<LayerWeights> layers;
  std::vector<Buffer> keep;    // converted host copies and device memory
  size_t device_bytes = 0;     // weight memory on the backend's device
};

// Checks every tensor's presence and shape against the (whole) config; errors name file and
// tensor. Under tensor parallelism only the shard's part of each tensor goes to the backend.
Weights load_weights(const ModelConfig& cfg, const WeightSource& src, ops::Backend& backend, TpShard shard = {});

// Total parameter count implied by the config (embeddings counted once when tied).
int64_t count_parameters(const ModelConfig& cfg);

}  // namespace lite_llama

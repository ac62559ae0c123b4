// Hyper-parameters of one decoder-only model, read from GGUF metadata or a HF config.json.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "ops/ops.h"

namespace lite_llama {

namespace gguf {
class File;
}

enum class RopeScaling { None, Linear, Llama3 };
const char* rope_scaling_name(RopeScaling r);

// A HF checkpoint's quantization_config (config.json), as far as the loaders use it.
struct QuantConfig {
  std::string method;     // "" (none), "gptq", "awq", "fp8"
  int bits = 0;           // gptq / awq: 4
  int group_size = 0;     // gptq / awq: weights per scale (0 = one per output channel)
  bool gptq_v1 = true;    // gptq: zeros stored minus one (checkpoint_format "gptq")
  int fp8_block = 0;      // fp8: 128 for weight_block_size [128, 128]; 0 = per-channel/tensor scale
};

struct ModelConfig {
  std::string arch;          // "llama", "qwen2", "qwen3" (see arch.h)
  std::string name;
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_layers = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
  int64_t max_position_embeddings = 0;
  float rms_norm_eps = 1e-5f;
  float rope_theta = 10000.f;
  int64_t rope_dim = 0;      // rotated dims per head (= head_dim for these families)
  RopeScaling rope_scaling = RopeScaling::None;
  float rope_factor = 1.f;
  float rope_low_freq_factor = 1.f;
  float rope_high_freq_factor = 4.f;
  int64_t rope_original_max_pos = 8192;
  std::vector<float> rope_freq_factors;  // GGUF rope_freqs.weight (divides inv_freq) if present
  ops::RopeLayout rope_layout = ops::RopeLayout::Neox;
  bool tie_word_embeddings = false;
  bool qkv_bias = false;
  bool o_bias = false;  // HF attention_bias outside Qwen2: o_proj has a bias too
  bool qk_norm = false;
  QuantConfig quant;
  // Mixture of experts (Qwen3-MoE); num_experts == 0 for dense models. Layer l is sparse when
  // (l + 1) % decoder_sparse_step == 0 and l is not in mlp_only_layers; dense layers use
  // intermediate_size, experts moe_intermediate_size.
  int64_t num_experts = 0;
  int64_t num_experts_per_tok = 0;
  int64_t moe_intermediate_size = 0;
  bool norm_topk_prob = false;
  int64_t decoder_sparse_step = 1;
  std::vector<int64_t> mlp_only_layers;

  bool is_moe() const { return num_experts > 0; }
  bool is_moe_layer(int64_t layer) const;
  bool has_dense_layers() const;

  // Rotary inverse frequencies after scaling (rope_dim / 2 values).
  std::vector<float> inv_freq() const;
  // K and V bytes one token takes in the cache for an element size.
  int64_t kv_bytes_per_token(int64_t elem_bytes) const {
    return 2 * num_layers * num_kv_heads * head_dim * elem_bytes;
  }
  // Throws lite_llama::Error when a value is missing or inconsistent; `source` names the file.
  void validate(const std::string& source) const;
};

ModelConfig config_from_gguf(const gguf::File& f);
// Reads a HF config.json (LlamaForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM, ...).
ModelConfig config_from_hf_json(const std::string& path);

}  // namespace lite_llama

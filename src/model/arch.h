// The architecture table: each supported family is a set of flags on the one decoder plus the
// tensor names its files use. Adding a family means adding a row here.
#pragma once
#include <string>
#include <string_view>

#include "ops/ops.h"

namespace lite_llama {

struct ArchSpec {
  const char* name;            // GGUF general.architecture
  const char* hf_model_type;   // HF config.json "model_type"
  const char* hf_class;        // HF config.json "architectures" entry
  bool qkv_bias;               // Qwen2: biases on q/k/v projections
  bool qk_norm;                // Qwen3: per-head RMSNorm of q and k before RoPE
  ops::RopeLayout gguf_rope_layout;
  bool moe;                    // Qwen3-MoE: sparse MLP layers of routed SwiGLU experts
};

// Throws lite_llama::Error listing the supported names; `source` names the file.
const ArchSpec& arch_spec(std::string_view name, const std::string& source);
const ArchSpec* arch_spec_by_hf_class(std::string_view hf_class);
const ArchSpec& arch_spec_by_hf_model_type(std::string_view model_type, const std::string& source);
std::string supported_arch_names();

// Tensor names for layer `l` (or -1 for global tensors) in GGUF and HF layouts.
enum class WeightRole {
  Embed, FinalNorm, LmHead, AttnNorm, Q, K, V, QBias, KBias, VBias, O, OBias, QNorm, KNorm, FfnNorm,
  Gate, Up, Down,
  Router,                          // MoE layers: [E, H]
  ExpertGate, ExpertUp, ExpertDown,  // one expert's [F, H], [F, H], [H, F]
};
std::string gguf_tensor_name(WeightRole r, int layer);
std::string hf_tensor_name(WeightRole r, int layer);
// Expert roles: HF names one tensor per expert; GGUF stacks a layer's experts into one
// [E, rows, cols] tensor (the name does not depend on `expert`).
std::string hf_expert_tensor_name(WeightRole r, int layer, int expert);

}  // namespace lite_llama

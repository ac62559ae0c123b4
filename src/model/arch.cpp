#include "model/arch.h"

#include <fmt/format.h>

#include "core/error.h"

namespace lite_llama {
namespace {

using ops::RopeLayout;

constexpr ArchSpec kArchs[] = {
    // name     HF model_type  HF class            bias   qk_norm gguf rope layout     moe
    {"llama", "llama", "LlamaForCausalLM", false, false, RopeLayout::Interleaved, false},
    {"mistral", "mistral", "MistralForCausalLM", false, false, RopeLayout::Interleaved, false},
    {"qwen2", "qwen2", "Qwen2ForCausalLM", true, false, RopeLayout::Neox, false},
    {"qwen3", "qwen3", "Qwen3ForCausalLM", false, true, RopeLayout::Neox, false},
    {"qwen3moe", "qwen3_moe", "Qwen3MoeForCausalLM", false, true, RopeLayout::Neox, true},
};

}  // namespace

std::string supported_arch_names() {
  std::string s;
  for (const ArchSpec& a : kArchs) s += (s.empty() ? "" : ", ") + std::string(a.name);
  return s;
}

const ArchSpec& arch_spec(std::string_view name, const std::string& source) {
  for (const ArchSpec& a : kArchs)
    if (name == a.name) return a;
  fail("{}: unsupported architecture '{}' (supported: {})", source, name, supported_arch_names());
}

const ArchSpec* arch_spec_by_hf_class(std::string_view hf_class) {
  for (const ArchSpec& a : kArchs)
    if (hf_class == a.hf_class) return &a;
  return nullptr;
}

const ArchSpec& arch_spec_by_hf_model_type(std::string_view model_type, const std::string& source) {
  for (const ArchSpec& a : kArchs)
    if (model_type == a.hf_model_type) return a;
  fail("{}: unsupported model_type '{}' (supported: {})", source, model_type, supported_arch_names());
}

std::string gguf_tensor_name(WeightRole r, int l) {
  switch (r) {
    case WeightRole::Embed: return "token_embd.weight";
    case WeightRole::FinalNorm: return "output_norm.weight";
    case WeightRole::LmHead: return "output.weight";
    case WeightRole::AttnNorm: return fmt::format("blk.{}.attn_norm.weight", l);
    case WeightRole::Q: return fmt::format("blk.{}.attn_q.weight", l);
    case WeightRole::K: return fmt::format("blk.{}.attn_k.weight", l);
    case WeightRole::V: return fmt::format("blk.{}.attn_v.weight", l);
    case WeightRole::QBias: return fmt::format("blk.{}.attn_q.bias", l);
    case WeightRole::KBias: return fmt::format("blk.{}.attn_k.bias", l);
    case WeightRole::VBias: return fmt::format("blk.{}.attn_v.bias", l);
    case WeightRole::O: return fmt::format("blk.{}.attn_output.weight", l);
    case WeightRole::OBias: return fmt::format("blk.{}.attn_output.bias", l);
    case WeightRole::QNorm: return fmt::format("blk.{}.attn_q_norm.weight", l);
    case WeightRole::KNorm: return fmt::format("blk.{}.attn_k_norm.weight", l);
    case WeightRole::FfnNorm: return fmt::format("blk.{}.ffn_norm.weight", l);
    case WeightRole::Gate: return fmt::format("blk.{}.ffn_gate.weight", l);
    case WeightRole::Up: return fmt::format("blk.{}.ffn_up.weight", l);
    case WeightRole::Down: return fmt::format("blk.{}.ffn_down.weight", l);
    case WeightRole::Router: return fmt::format("blk.{}.ffn_gate_inp.weight", l);
    case WeightRole::ExpertGate: return fmt::format("blk.{}.ffn_gate_exps.weight", l);
    case WeightRole::ExpertUp: return fmt::format("blk.{}.ffn_up_exps.weight", l);
    case WeightRole::ExpertDown: return fmt::format("blk.{}.ffn_down_exps.weight", l);
  }
  return "";
}

std::string hf_tensor_name(WeightRole r, int l) {
  const std::string p = fmt::format("model.layers.{}.", l);
  switch (r) {
    case WeightRole::Embed: return "model.embed_tokens.weight";
    case WeightRole::FinalNorm: return "model.norm.weight";
    case WeightRole::LmHead: return "lm_head.weight";
    case WeightRole::AttnNorm: return p + "input_layernorm.weight";
    case WeightRole::Q: return p + "self_attn.q_proj.weight";
    case WeightRole::K: return p + "self_attn.k_proj.weight";
    case WeightRole::V: return p + "self_attn.v_proj.weight";
    case WeightRole::QBias: return p + "self_attn.q_proj.bias";
    case WeightRole::KBias: return p + "self_attn.k_proj.bias";
    case WeightRole::VBias: return p + "self_attn.v_proj.bias";
    case WeightRole::O: return p + "self_attn.o_proj.weight";
    case WeightRole::OBias: return p + "self_attn.o_proj.bias";
    case WeightRole::QNorm: return p + "self_attn.q_norm.weight";
    case WeightRole::KNorm: return p + "self_attn.k_norm.weight";
    case WeightRole::FfnNorm: return p + "post_attention_layernorm.weight";
    case WeightRole::Gate: return p + "mlp.gate_proj.weight";
    case WeightRole::Up: return p + "mlp.up_proj.weight";
    case WeightRole::Down: return p + "mlp.down_proj.weight";
    case WeightRole::Router: return p + "mlp.gate.weight";
    case WeightRole::ExpertGate:
    case WeightRole::ExpertUp:
    case WeightRole::ExpertDown: return hf_expert_tensor_name(r, l, 0);
  }
  return "";
}

std::string hf_expert_tensor_name(WeightRole r, int l, int e) {
  const char* proj = r == WeightRole::ExpertGate ? "gate_proj" : r == WeightRole::ExpertUp ? "up_proj" : "down_proj";
  return fmt::format("model.layers.{}.mlp.experts.{}.{}.weight", l, e, proj);
}

}  // namespace lite_llama

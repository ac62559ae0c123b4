#include "model/model_config.h"

#include <cmath>

#include "core/error.h"
#include "io/gguf.h"
#include "model/arch.h"

namespace lite_llama {

const char* rope_scaling_name(RopeScaling r) {
  switch (r) {
    case RopeScaling::None: return "none";
    case RopeScaling::Linear: return "linear";
    case RopeScaling::Llama3: return "llama3";
  }
  return "?";
}

std::vector<float> ModelConfig::inv_freq() const {
  const int half = int(rope_dim / 2);
  std::vector<float> f(static_cast<size_t>(half));
  for (int i = 0; i < half; ++i) {
    // As HF: 1 / theta^(2i/d) computed in fp32 from an int64 arange.
    f[size_t(i)] = 1.0f / std::pow(rope_theta, float(2 * i) / float(rope_dim));
  }
  if (!rope_freq_factors.empty()) {
    // GGUF llama-3.1+ files carry the scaling as per-frequency divisors (rope_freqs.weight).
    for (int i = 0; i < half && i < int(rope_freq_factors.size()); ++i)
      f[size_t(i)] /= rope_freq_factors[size_t(i)];
    return f;
  }
  if (rope_scaling == RopeScaling::Linear) {
    for (float& v : f) v /= rope_factor;
  } else if (rope_scaling == RopeScaling::Llama3) {
    // Llama 3.1 frequency-dependent scaling (transformers' _compute_llama3_parameters).
    const float low_wavelen = float(rope_original_max_pos) / rope_low_freq_factor;
    const float high_wavelen = float(rope_original_max_pos) / rope_high_freq_factor;
    for (float& v : f) {
      const float wavelen = 2.0f * float(M_PI) / v;
      if (wavelen > low_wavelen) {
        v = v / rope_factor;
      } else if (wavelen >= high_wavelen) {
        const float smooth = (float(rope_original_max_pos) / wavelen - rope_low_freq_factor) /
                             (rope_high_freq_factor - rope_low_freq_factor);
        v = (1.0f - smooth) * v / rope_factor + smooth * v;
      }
    }
  }
  return f;
}

bool ModelConfig::is_moe_layer(int64_t l) const {
  if (num_experts <= 0 || (l + 1) % decoder_sparse_step != 0) return false;
  for (int64_t d : mlp_only_layers)
    if (d == l) return false;
  return true;
}

bool ModelConfig::has_dense_layers() const {
  for (int64_t l = 0; l < num_layers; ++l)
    if (!is_moe_layer(l)) return true;
  return false;
}

void ModelConfig::validate(const std::string& source) const {
  auto positive = [&](int64_t v, const char* what) {
    LL_CHECK(v > 0, "{}: {} must be positive, got {}", source, what, v);
  };
  positive(vocab_size, "vocab_size");
  positive(hidden_size, "hidden_size");
  positive(intermediate_size, "intermediate_size");
  positive(num_layers, "num_hidden_layers");
  positive(num_heads, "num_attention_heads");
  positive(num_kv_heads, "num_key_value_heads");
  positive(head_dim, "head_dim");
  positive(max_position_embeddings, "max_position_embeddings");
  LL_CHECK(num_heads % num_kv_heads == 0,
           "{}: num_attention_heads {} is not a multiple of num_key_value_heads {}", source,
           num_heads, num_kv_heads);
  LL_CHECK(rope_dim > 0 && rope_dim <= head_dim && rope_dim % 2 == 0,
           "{}: rotary dimension {} invalid for head_dim {}", source, rope_dim, head_dim);
  LL_CHECK(rms_norm_eps > 0 && std::isfinite(rms_norm_eps), "{}: rms_norm_eps must be positive",
           source);
  LL_CHECK(rope_theta > 0 && std::isfinite(rope_theta), "{}: rope_theta must be positive", source);
  LL_CHECK(rope_factor > 0, "{}: rope scaling factor must be positive", source);
  LL_CHECK(head_dim <= 256, "{}: head_dim {} over 256 is not supported", source, head_dim);
  if (num_experts > 0) {
    LL_CHECK(num_experts <= 1024, "{}: num_experts {} over 1024 is not supported", source, num_experts);
    LL_CHECK(num_experts_per_tok >= 1 && num_experts_per_tok <= num_experts,
             "{}: num_experts_per_tok {} must be in 1..num_experts ({})", source, num_experts_per_tok,
             num_experts);
    positive(moe_intermediate_size, "moe_intermediate_size");
    positive(decoder_sparse_step, "decoder_sparse_step");
    for (int64_t l : mlp_only_layers)
      LL_CHECK(l >= 0 && l < num_layers, "{}: mlp_only_layers entry {} is not a layer (0..{})", source, l,
               num_layers - 1);
  }
}

ModelConfig config_from_gguf(const gguf::File& f) {
  ModelConfig c;
  c.arch = f.get_string("general.architecture", "");
  LL_CHECK(!c.arch.empty(), "{}: missing metadata key 'general.architecture'", f.path());
  const ArchSpec& spec = arch_spec(c.arch, f.path());
  c.name = f.get_string("general.name", c.arch);
  const std::string a = c.arch + ".";
  auto req = [&](const std::string& key) { return int64_t(f.get(a + key).as_u64(a + key)); };
  c.num_layers = req("block_count");
  c.hidden_size = req("embedding_length");
  if (spec.moe) {
    // qwen3moe: every layer sparse (llama.cpp has no dense layers for it); the router's top-k
    // weights are renormalised unless expert_weights_norm says otherwise.
    c.num_experts = req("expert_count");
    c.num_experts_per_tok = req("expert_used_count");
    c.moe_intermediate_size = req("expert_feed_forward_length");
    c.norm_topk_prob = f.get_bool(a + "expert_weights_norm", true);
    c.intermediate_size = int64_t(f.get_u64(a + "feed_forward_length", uint64_t(c.moe_intermediate_size)));
  } else {
    c.intermediate_size = req("feed_forward_length");
  }
  c.num_heads = req("attention.head_count");
  c.num_kv_heads = int64_t(f.get_u64(a + "attention.head_count_kv", uint64_t(c.num_heads)));
  c.max_position_embeddings = int64_t(f.get_u64(a + "context_length", 2048));
  c.head_dim = int64_t(f.get_u64(a + "attention.key_length",
                                 uint64_t(c.num_heads ? c.hidden_size / c.num_heads : 0)));
  c.rope_dim = int64_t(f.get_u64(a + "rope.dimension_count", uint64_t(c.head_dim)));
  c.rms_norm_eps = float(f.get_f64(a + "attention.layer_norm_rms_epsilon", 1e-5));
  c.rope_theta = float(f.get_f64(a + "rope.freq_base", 10000.0));
  const std::string scaling = f.get_string(a + "rope.scaling.type", "none");
  if (scaling == "linear") {
    c.rope_scaling = RopeScaling::Linear;
    c.rope_factor = float(f.get_f64(a + "rope.scaling.factor", 1.0));
  } else if (scaling != "none") {
    fail("{}: rope scaling type '{}' is not supported (none, linear)", f.path(), scaling);
  }
  if (const gguf::Value* v = f.find(a + "vocab_size")) {
    c.vocab_size = int64_t(v->as_u64(a + "vocab_size"));
  } else if (const gguf::Value* t = f.find("tokenizer.ggml.tokens")) {
    c.vocab_size = int64_t(t->as_array("tokenizer.ggml.tokens").size());
  }
  // The llama.cpp converter permutes llama Q/K rows for interleaved rotary pairs; qwen files keep
  // HF's rotate-half layout.
  c.rope_layout = spec.gguf_rope_layout;
  c.qkv_bias = spec.qkv_bias;
  c.qk_norm = spec.qk_norm;
  c.tie_word_embeddings = f.find_tensor("output.weight") == nullptr;
  if (const gguf::TensorInfo* rf = f.find_tensor("rope_freqs.weight")) {
    LL_CHECK(rf->type == DType::F32 && rf->ne[0] == c.rope_dim / 2,
             "{}: tensor 'rope_freqs.weight' must be F32 of {} values", f.path(), c.rope_dim / 2);
    const float* p = reinterpret_cast<const float*>(rf->data);
    c.rope_freq_factors.assign(p, p + c.rope_dim / 2);
    c.rope_scaling = RopeScaling::Llama3;
  }
  c.validate(f.path());
  return c;
}

}  // namespace lite_llama

// HF config.json -> ModelConfig for the architectures of the arch table.
#include <nlohmann/json.hpp>

#include <cctype>

#include <fstream>

#include "core/error.h"
#include "core/log.h"
#include "model/arch.h"
#include "model/model_config.h"

namespace lite_llama {
namespace {

using nlohmann::json;

int64_t get_int(const json& j, const char* key, const std::string& file, int64_t def = -1) {
  if (!j.contains(key) || j[key].is_null()) {
    LL_CHECK(def >= 0, "{}: missing field '{}'", file, key);
    return def;
  }
  LL_CHECK(j[key].is_number_integer(), "{}: field '{}' must be an integer", file, key);
  return j[key].get<int64_t>();
}

double get_num(const json& j, const char* key, const std::string& file, double def) {
  if (!j.contains(key) || j[key].is_null()) return def;
  LL_CHECK(j[key].is_number(), "{}: field '{}' must be a number", file, key);
  return j[key].get<double>();
}

bool get_bool(const json& j, const char* key, const std::string& file, bool def) {
  if (!j.contains(key) || j[key].is_null()) return def;
  LL_CHECK(j[key].is_boolean(), "{}: field '{}' must be true or false", file, key);
  return j[key].get<bool>();
}

// `in` prefixes the key in the error ("quantization_config.").
std::string get_str(const json& j, const char* key, const std::string& file, const std::string& def,
                    const char* in = "") {
  if (!j.contains(key) || j[key].is_null()) return def;
  LL_CHECK(j[key].is_string(), "{}: field '{}{}' must be a string", file, in, key);
  return j[key].get<std::string>();
}

// quantization_config: GPTQ and AWQ 4-bit (groups of 32/64/128 or per channel), FP8 e4m3 with
// per-channel/tensor scales or 128 x 128 blocks. Anything else is refused here, at load.
QuantConfig parse_quantization(const json& q, const std::string& file) {
  LL_CHECK(q.is_object(), "{}: quantization_config must be an object", file);
  QuantConfig c;
  c.method = get_str(q, "quant_method", file, "", "quantization_config.");
  for (auto& ch : c.method) ch = char(std::tolower(static_cast<unsigned char>(ch)));
  auto group = [&]() {
    const int64_t g = get_int(q, "group_size", file, 128);
    LL_CHECK(g == -1 || g == 32 || g == 64 || g == 128,
             "{}: quantization_config.group_size {} is not supported (32, 64, 128 or -1)", file, g);
    return g == -1 ? 0 : int(g);
  };
  if (c.method == "gptq") {
    c.bits = int(get_int(q, "bits", file));
    LL_CHECK(c.bits == 4, "{}: GPTQ with {} bits is not supported (4)", file, c.bits);
    c.group_size = group();
    const std::string fmt = get_str(q, "checkpoint_format", file, "gptq", "quantization_config.");
    LL_CHECK(fmt == "gptq" || fmt == "gptq_v2", "{}: GPTQ checkpoint_format '{}' is not supported (gptq, gptq_v2)",
             file, fmt);
    c.gptq_v1 = fmt == "gptq";
  } else if (c.method == "awq") {
    c.bits = int(get_int(q, q.contains("w_bit") && !q.contains("bits") ? "w_bit" : "bits", file));
    LL_CHECK(c.bits == 4, "{}: AWQ with {} bits is not supported (4)", file, c.bits);
    c.group_size = group();
    std::string ver = get_str(q, "version", file, "gemm", "quantization_config.");
    for (auto& ch : ver) ch = char(std::tolower(static_cast<unsigned char>(ch)));
    LL_CHECK(ver == "gemm", "{}: AWQ version '{}' is not supported (gemm packing)", file, ver);
    LL_CHECK(get_bool(q, "zero_point", file, true), "{}: AWQ without zero points is not supported", file);
  } else if (c.method == "fp8") {
    const std::string fmt = get_str(q, "fmt", file, "e4m3", "quantization_config.");
    LL_CHECK(fmt == "e4m3", "{}: FP8 format '{}' is not supported (e4m3)", file, fmt);
    if (q.contains("weight_block_size") && !q["weight_block_size"].is_null()) {
      const json& b = q["weight_block_size"];
      LL_CHECK(b.is_array() && b.size() == 2 && b[0] == 128 && b[1] == 128,
               "{}: FP8 weight_block_size {} is not supported ([128, 128])", file, b.dump());
      c.fp8_block = 128;
    }
  } else {
    fail("{}: quantization method '{}' is not supported (gptq, awq, fp8)", file, c.method);
  }
  return c;
}

void parse_rope_scaling(const json& r, const std::string& file, ModelConfig& c) {
  if (r.is_null()) return;
  LL_CHECK(r.is_object(), "{}: rope_scaling must be an object or null", file);
  // Not json::value: its type_error names neither the file nor the field.
  const std::string old_type = get_str(r, "type", file, "default");
  const std::string type = get_str(r, "rope_type", file, old_type);
  if (type == "default") return;
  c.rope_factor = float(get_num(r, "factor", file, 1.0));
  if (type == "linear") {
    c.rope_scaling = RopeScaling::Linear;
  } else if (type == "llama3") {
    c.rope_scaling = RopeScaling::Llama3;
    c.rope_low_freq_factor = float(get_num(r, "low_freq_factor", file, 1.0));
    c.rope_high_freq_factor = float(get_num(r, "high_freq_factor", file, 4.0));
    c.rope_original_max_pos = get_int(r, "original_max_position_embeddings", file, 8192);
    LL_CHECK(c.rope_high_freq_factor != c.rope_low_freq_factor,
             "{}: rope_scaling low_freq_factor equals high_freq_factor", file);
  } else {
    fail("{}: rope_scaling type '{}' is not supported (default, linear, llama3)", file, type);
  }
}

// Qwen3MoeConfig's fields (transformers' defaults where absent).
void parse_moe(const json& j, const std::string& file, ModelConfig& c) {
  // transformers 5 writes num_local_experts (its attribute map's name for num_experts).
  c.num_experts = get_int(j, j.contains("num_experts") ? "num_experts" : "num_local_experts", file);
  c.num_experts_per_tok = get_int(j, "num_experts_per_tok", file);
  c.moe_intermediate_size = get_int(j, "moe_intermediate_size", file);
  c.norm_topk_prob = get_bool(j, "norm_topk_prob", file, false);
  c.decoder_sparse_step = get_int(j, "decoder_sparse_step", file, 1);
  if (j.contains("mlp_only_layers") && !j["mlp_only_layers"].is_null()) {
    const json& m = j["mlp_only_layers"];
    LL_CHECK(m.is_array(), "{}: mlp_only_layers must be a list of layer indices", file);
    for (const json& v : m) {
      LL_CHECK(v.is_number_integer(), "{}: mlp_only_layers must be a list of layer indices", file);
      c.mlp_only_layers.push_back(v.get<int64_t>());
    }
  }
}

}  // namespace

ModelConfig config_from_hf_json(const std::string& path) {
  std::ifstream in(path);
  LL_CHECK(in.good(), "cannot read '{}'", path);
  json j = json::parse(in, nullptr, false);
  LL_CHECK(!j.is_discarded() && j.is_object(), "{}: not a JSON object", path);
  ModelConfig c;
  const ArchSpec* spec = nullptr;
  if (j.contains("architectures") && j["architectures"].is_array() && !j["architectures"].empty() &&
      j["architectures"][0].is_string()) {
    const std::string cls = j["architectures"][0].get<std::string>();
    spec = arch_spec_by_hf_class(cls);
    LL_CHECK(spec, "{}: unsupported architecture '{}' (supported: {})", path, cls,
             supported_arch_names());
  } else {
    LL_CHECK(j.contains("model_type") && j["model_type"].is_string(),
             "{}: neither 'architectures' nor 'model_type' is given", path);
    spec = &arch_spec_by_hf_model_type(j["model_type"].get<std::string>(), path);
  }
  const std::string act = get_str(j, "hidden_act", path, "silu");
  LL_CHECK(act == "silu", "{}: hidden_act '{}' is not supported (silu)", path, act);
  LL_CHECK(!get_bool(j, "mlp_bias", path, false), "{}: mlp_bias=true is not supported", path);
  LL_CHECK(!get_bool(j, "use_sliding_window", path, false),
           "{}: sliding-window attention is not supported", path);
  if (j.contains("quantization_config")) c.quant = parse_quantization(j["quantization_config"], path);
  c.arch = spec->name;
  c.name = get_str(j, "_name_or_path", path, spec->name);
  c.vocab_size = get_int(j, "vocab_size", path);
  c.hidden_size = get_int(j, "hidden_size", path);
  c.intermediate_size = get_int(j, "intermediate_size", path);
  c.num_layers = get_int(j, "num_hidden_layers", path);
  c.num_heads = get_int(j, "num_attention_heads", path);
  c.num_kv_heads = get_int(j, "num_key_value_heads", path, c.num_heads);
  c.head_dim = get_int(j, "head_dim", path, c.num_heads > 0 ? c.hidden_size / c.num_heads : 0);
  c.rope_dim = c.head_dim;
  c.max_position_embeddings = get_int(j, "max_position_embeddings", path, 2048);
  // Mistral 7B v0.1 attends to the last `sliding_window` tokens only (no use_sliding_window
  // switch, unlike Qwen2). Up to that length full attention is the same function, so the
  // context is capped there rather than computing something else beyond it.
  if (c.arch == std::string("mistral") && j.contains("sliding_window") &&
      !j["sliding_window"].is_null()) {
    const int64_t w = get_int(j, "sliding_window", path);
    if (w > 0 && w < c.max_position_embeddings) {
      LL_WARN("{}: sliding_window {} is not implemented: the context is limited to {} tokens", path,
              w, w);
      c.max_position_embeddings = w;
    }
  }
  c.rms_norm_eps = float(get_num(j, "rms_norm_eps", path, 1e-6));
  // transformers 5 folds rope_theta and the scaling into rope_parameters.
  const json rp = j.contains("rope_parameters") ? j["rope_parameters"] : json();
  c.rope_theta = float(get_num(rp.is_object() ? rp : j, "rope_theta", path,
                               get_num(j, "rope_theta", path, 10000.0)));
  const bool has_scaling = j.contains("rope_scaling") && !j["rope_scaling"].is_null();
  parse_rope_scaling(has_scaling ? j["rope_scaling"] : rp, path, c);
  c.tie_word_embeddings = get_bool(j, "tie_word_embeddings", path, false);
  // attention_bias (Llama, Qwen3) puts a bias on o_proj as well as q/k/v; Qwen2 has q/k/v only.
  const bool attention_bias = get_bool(j, "attention_bias", path, false);
  c.qkv_bias = spec->qkv_bias || attention_bias;
  c.o_bias = !spec->qkv_bias && attention_bias;
  c.qk_norm = spec->qk_norm;
  c.rope_layout = ops::RopeLayout::Neox;
  if (spec->moe) parse_moe(j, path, c);
  c.validate(path);
  return c;
}

}  // namespace lite_llama

#include "model/weights.h"

#include <cmath>
#include <cstring>
#include <map>

#include "core/error.h"
#include "core/quant.h"
#include "io/gguf.h"
#include "io/safetensors.h"
#include "model/hf_quant.h"
#include "model/tp_shard.h"

#include <random>

namespace lite_llama {
namespace {

class GgufSource final : public WeightSource {
 public:
  explicit GgufSource(std::shared_ptr<const gguf::File> f) : f_(std::move(f)) {
    for (const auto& t : f_->tensors()) views_.emplace(t.name, t.view());
  }
  const std::string& path() const override { return f_->path(); }
  const Tensor* find(WeightRole role, int layer) const override {
    auto it = views_.find(gguf_tensor_name(role, layer));
    return it == views_.end() ? nullptr : &it->second;
  }
  std::string tensor_name(WeightRole role, int layer) const override {
    return gguf_tensor_name(role, layer);
  }
  std::optional<Tensor> find_expert(WeightRole role, int layer, int expert) const override {
    const Tensor* all = find(role, layer);
    if (!all) return std::nullopt;
    if (all->ndim != 3) return *all;  // the loader's shape check names it
    if (expert >= all->shape[0]) return std::nullopt;
    Tensor t(all->data, all->dtype, {all->shape[1], all->shape[2]}, all->device);
    t.data = static_cast<uint8_t*>(all->data) + size_t(expert) * t.nbytes();
    return t;
  }
  std::string expert_tensor_name(WeightRole role, int layer, int expert) const override {
    return fmt::format("{} (expert {})", gguf_tensor_name(role, layer), expert);
  }

 private:
  std::shared_ptr<const gguf::File> f_;
  std::map<std::string, Tensor> views_;
};

class HfSource final : public WeightSource {
 public:
  HfSource(std::shared_ptr<const safetensors::Archive> a, const QuantConfig& q) : a_(std::move(a)) {
    if (q.method.empty()) return;
    // Quantised layers become GQ host tensors under their plain "<prefix>.weight" names.
    for (const auto& [name, e] : a_->tensors()) {
      std::string prefix;
      if (name.size() > 8 && name.ends_with(".qweight")) prefix = name.substr(0, name.size() - 8);
      else if (name.ends_with(".weight") && e.view.dtype == DType::F8_E4M3) prefix = name.substr(0, name.size() - 7);
      else continue;
      Tensor t;
      if (load_quantized_linear(*a_, q, prefix, keep_, t)) quantized_[prefix + ".weight"] = t;
    }
    LL_CHECK(!quantized_.empty(), "{}: quantization_config says '{}' but no quantised tensors were found",
             a_->path(), q.method);
  }
  const std::string& path() const override { return a_->path(); }
  const Tensor* find(WeightRole role, int layer) const override {
    const std::string name = hf_tensor_name(role, layer);
    if (auto it = quantized_.find(name); it != quantized_.end()) return &it->second;
    const safetensors::TensorEntry* e = a_->find(name);
    return e ? &e->view : nullptr;
  }
  std::string tensor_name(WeightRole role, int layer) const override {
    return hf_tensor_name(role, layer);
  }
  // Hub checkpoints store one tensor per expert; transformers 5 saves a layer's experts fused
  // ("mlp.experts.gate_up_proj" [E, 2F, H], gate rows first, and "mlp.experts.down_proj").
  std::optional<Tensor> find_expert(WeightRole role, int layer, int expert) const override {
    const std::string name = hf_expert_tensor_name(role, layer, expert);
    if (auto it = quantized_.find(name); it != quantized_.end()) return it->second;
    if (const safetensors::TensorEntry* e = a_->find(name)) return e->view;
    const safetensors::TensorEntry* f = a_->find(fused_name(role, layer));
    if (!f) return std::nullopt;
    const Tensor& all = f->view;
    if (all.ndim != 3) return all;  // the loader's shape check names it
    if (expert >= all.shape[0]) return std::nullopt;
    const bool gate_up = role != WeightRole::ExpertDown;
    const int64_t rows = gate_up ? all.shape[1] / 2 : all.shape[1];
    Tensor t(all.data, all.dtype, {rows, all.shape[2]}, all.device);
    const int64_t row0 = expert * all.shape[1] + (role == WeightRole::ExpertUp ? rows : 0);
    t.data = static_cast<uint8_t*>(all.data) + size_t(row0) * t.row_nbytes();
    return t;
  }
  std::string expert_tensor_name(WeightRole role, int layer, int expert) const override {
    if (a_->find(hf_expert_tensor_name(role, layer, expert)) || !a_->find(fused_name(role, layer)))
      return hf_expert_tensor_name(role, layer, expert);
    return fmt::format("{} (expert {})", fused_name(role, layer), expert);
  }

 private:
  static std::string fused_name(WeightRole role, int layer) {
    return fmt::format("model.layers.{}.mlp.experts.{}", layer,
                       role == WeightRole::ExpertDown ? "down_proj" : "gate_up_proj");
  }

  std::shared_ptr<const safetensors::Archive> a_;
  std::map<std::string, Tensor> quantized_;
  std::vector<Buffer> keep_;
};

class DummySource final : public WeightSource {
 public:
  DummySource(const ModelConfig& c, uint64_t seed)
      : path_("dummy:" + c.name), experts_(c.num_experts), hidden_(c.hidden_size), moe_ffn_(c.moe_intermediate_size) {
    const int64_t H = c.hidden_size, V = c.vocab_size, F = c.intermediate_size;
    const int64_t D = c.head_dim, Hq = c.num_heads, Hkv = c.num_kv_heads;
    std::mt19937_64 rng(seed);
    auto vec = [&](WeightRole r, int l, int64_t n, float center, float spread) {
      Buffer b = host_buffer(size_t(n) * 4);
      std::uniform_real_distribution<float> u(center - spread, center + spread);
      for (int64_t i = 0; i < n; ++i) b.as<float>()[i] = u(rng);
      map_[key(r, l)] = Tensor(b.data(), DType::F32, {n});
      keep_.push_back(std::move(b));
    };
    auto mat = [&](WeightRole r, int l, int64_t rows, int64_t cols) {
      map_[key(r, l)] = Tensor(nullptr, DType::BF16, {rows, cols});
    };
    mat(WeightRole::Embed, -1, V, H);
    vec(WeightRole::FinalNorm, -1, H, 1.f, 0.1f);
    if (!c.tie_word_embeddings) mat(WeightRole::LmHead, -1, V, H);
    for (int l = 0; l < int(c.num_layers); ++l) {
      vec(WeightRole::AttnNorm, l, H, 1.f, 0.1f);
      vec(WeightRole::FfnNorm, l, H, 1.f, 0.1f);
      if (c.qk_norm) {
        vec(WeightRole::QNorm, l, D, 1.f, 0.1f);
        vec(WeightRole::KNorm, l, D, 1.f, 0.1f);
      }
      if (c.qkv_bias) {
        vec(WeightRole::QBias, l, Hq * D, 0.f, 0.1f);
        vec(WeightRole::KBias, l, Hkv * D, 0.f, 0.1f);
        vec(WeightRole::VBias, l, Hkv * D, 0.f, 0.1f);
      }
      if (c.o_bias) vec(WeightRole::OBias, l, H, 0.f, 0.1f);
      mat(WeightRole::Q, l, Hq * D, H);
      mat(WeightRole::K, l, Hkv * D, H);
      mat(WeightRole::V, l, Hkv * D, H);
      mat(WeightRole::O, l, H, Hq * D);
      if (c.is_moe_layer(l)) {
        mat(WeightRole::Router, l, c.num_experts, H);  // experts: find_expert
        continue;
      }
      mat(WeightRole::Gate, l, F, H);
      mat(WeightRole::Up, l, F, H);
      mat(WeightRole::Down, l, H, F);
    }
  }
  const std::string& path() const override { return path_; }
  const Tensor* find(WeightRole role, int layer) const override {
    auto it = map_.find(key(role, layer));
    return it == map_.end() ? nullptr : &it->second;
  }
  std::string tensor_name(WeightRole role, int layer) const override {
    return hf_tensor_name(role, layer);
  }
  // Shapes only (data == nullptr): the backend draws the values on its device, never in host
  // memory at full size.
  std::optional<Tensor> find_expert(WeightRole role, int layer, int expert) const override {
    if (expert >= experts_ || !find(WeightRole::Router, layer)) return std::nullopt;
    if (role == WeightRole::ExpertDown) return Tensor(nullptr, DType::BF16, {hidden_, moe_ffn_});
    return Tensor(nullptr, DType::BF16, {moe_ffn_, hidden_});
  }
  std::string expert_tensor_name(WeightRole role, int layer, int expert) const override {
    return hf_expert_tensor_name(role, layer, expert);
  }

 private:
  static int64_t key(WeightRole r, int l) { return int64_t(l + 1) * 64 + int64_t(r); }
  std::string path_;
  int64_t experts_, hidden_, moe_ffn_;
  std::map<int64_t, Tensor> map_;
  std::vector<Buffer> keep_;
};

class Loader {
 public:
  Loader(const ModelConfig& c, const WeightSource& s, ops::Backend& b, Weights& w, TpShard shard)
      : cfg_(c), src_(s), be_(b), w_(w), shard_(shard) {}

  // The tensor's full shape is checked; the result is this rank's shard of it.
  Tensor get(WeightRole r, int l, int64_t rows, int64_t cols) {
    const Tensor* t = src_.find(r, l);
    LL_CHECK(t != nullptr, "{}: missing tensor '{}'", src_.path(), src_.tensor_name(r, l));
    bool ok = (cols == 0 && t->ndim == 1 && t->shape[0] == rows) ||
              (cols > 0 && t->ndim == 2 && t->shape[0] == rows && t->shape[1] == cols);
    LL_CHECK(ok, "{}: tensor '{}' has shape {}, expected [{}{}]", src_.path(),
             src_.tensor_name(r, l), t->shape_str(), rows, cols ? fmt::format(", {}", cols) : "");
    check_type(*t, src_.tensor_name(r, l));
    return shard_weight(cfg_, shard_, r, *t, src_.tensor_name(r, l), w_.keep);
  }

  // Checked here, where the tensor's name is known: the backends would only name the type.
  void check_type(const Tensor& t, const std::string& name) {
    LL_CHECK(t.dtype != DType::F8_E4M3,
             "{}: tensor '{}' has type F8_E4M3, but config.json has no fp8 quantization_config (its scales)",
             src_.path(), name);
    LL_CHECK(t.dtype != DType::I32 && dtype_info(t.dtype).supported,
             "{}: tensor '{}' has type {}, which cannot hold weights (F32, F16, BF16, Q8_0, "
             "Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K can)",
             src_.path(), name, dtype_name(t.dtype));
  }

  Tensor expert(WeightRole r, int l, int e, int64_t rows, int64_t cols) {
    const std::optional<Tensor> t = src_.find_expert(r, l, e);
    const std::string name = src_.expert_tensor_name(r, l, e);
    LL_CHECK(t.has_value(), "{}: missing tensor '{}'", src_.path(), name);
    LL_CHECK(t->ndim == 2 && t->shape[0] == rows && t->shape[1] == cols,
             "{}: tensor '{}' has shape {}, expected [{}, {}] per expert", src_.path(), name, t->shape_str(),
             rows, cols);
    check_type(*t, name);
    return *t;
  }

  // A sparse layer's experts, handed to the backend together (it may stack them).
  ops::MoeExperts experts(int l) {
    const int64_t H = cfg_.hidden_size, F = cfg_.moe_intermediate_size;
    ops::MoeExperts host;
    host.num_experts = int(cfg_.num_experts);
    host.hidden = H;
    host.ffn = F;
    for (int e = 0; e < host.num_experts; ++e) {
      host.gate.push_back(expert(WeightRole::ExpertGate, l, e, F, H));
      host.up.push_back(expert(WeightRole::ExpertUp, l, e, F, H));
      host.down.push_back(expert(WeightRole::ExpertDown, l, e, H, F));
    }
    return be_.prepare_experts(host, 0x9e3779b97f4a7c15ull * ++random_count_, w_.keep);
  }

  // Small vectors (norm weights, biases) become F32 and are uploaded as they are.
  Tensor vector_f32(std::initializer_list<const Tensor*> parts) {
    int64_t n = 0;
    for (const Tensor* p : parts) n += p->numel();
    Buffer buf = host_buffer(size_t(n) * 4);
    float* dst = buf.as<float>();
    for (const Tensor* p : parts) {
      dequantize_row(p->dtype, p->data, dst, p->numel());
      dst += p->numel();
    }
    Tensor host(buf.data(), DType::F32, {n});
    w_.keep.push_back(std::move(buf));
    return be_.upload(host, w_.keep);
  }
  Tensor norm(WeightRole r, int l, int64_t n) {
    const Tensor t = get(r, l, n, 0);
    return vector_f32({&t});
  }

  // Dummy 2-D weights (data == nullptr) are generated on the backend's device.
  // `fan_in`: the whole product's inner size where this is a row-parallel shard of it.
  Tensor random(int64_t rows, int64_t cols, bool embedding = false, int64_t fan_in = 0) {
    const float scale = 1.0f / std::sqrt(float(fan_in ? fan_in : cols));  // keeps activations O(1) layer to layer
    return be_.random_weight(rows, cols, 0x9e3779b97f4a7c15ull * ++random_count_, scale, w_.keep, embedding);
  }

  ops::Linear linear(std::initializer_list<const Tensor*> parts, Tensor bias, int64_t fan_in = 0) {
    if ((*parts.begin())->data == nullptr) {
      ops::Linear lin;
      for (const Tensor* p : parts) lin.out_features += p->rows(), lin.in_features = p->cols();
      lin.parts = {random(lin.out_features, lin.in_features, false, fan_in)};
      if (bias.data) lin.bias = be_.prepare_bias(bias, w_.keep);  // prepare_linear's conversion
      return lin;
    }
    ops::Linear lin;
    for (const Tensor* p : parts) {
      lin.parts.push_back(*p);
      lin.out_features += p->rows();
      lin.in_features = p->cols();
    }
    lin.bias = bias;
    return be_.prepare_linear(lin, w_.keep);
  }

  void load() {
    const int64_t H = cfg_.hidden_size, V = cfg_.vocab_size, F = cfg_.intermediate_size;
    const int64_t D = cfg_.head_dim, Hq = cfg_.num_heads, Hkv = cfg_.num_kv_heads;
    const Tensor emb = get(WeightRole::Embed, -1, V, H);
    w_.embed = emb.data ? be_.prepare_weight(emb, w_.keep) : random(emb.rows(), H, true);
    if (shard_.active() && !emb.data) zero_rows_from(w_.embed, vocab_shard_rows(cfg_.vocab_size, shard_.size));
    w_.final_norm = norm(WeightRole::FinalNorm, -1, H);
    if (cfg_.tie_word_embeddings) {
      // Reuse the prepared embedding: a tied head costs no second copy on any device.
      w_.lm_head.parts = {w_.embed};
      w_.lm_head.in_features = H;
      w_.lm_head.out_features = w_.embed.rows();
    } else {
      const Tensor head = get(WeightRole::LmHead, -1, V, H);
      w_.lm_head = linear({&head}, Tensor());
    }
    for (int l = 0; l < int(cfg_.num_layers); ++l) {
      LayerWeights lw;
      lw.attn_norm = norm(WeightRole::AttnNorm, l, H);
      lw.ffn_norm = norm(WeightRole::FfnNorm, l, H);
      if (cfg_.qk_norm) {
        lw.q_norm = norm(WeightRole::QNorm, l, D);
        lw.k_norm = norm(WeightRole::KNorm, l, D);
      }
      Tensor bias;
      if (cfg_.qkv_bias) {
        const Tensor qb = get(WeightRole::QBias, l, Hq * D, 0), kb = get(WeightRole::KBias, l, Hkv * D, 0),
                     vb = get(WeightRole::VBias, l, Hkv * D, 0);
        bias = vector_f32({&qb, &kb, &vb});
      }
      const Tensor q = get(WeightRole::Q, l, Hq * D, H), k = get(WeightRole::K, l, Hkv * D, H),
                   v = get(WeightRole::V, l, Hkv * D, H), o = get(WeightRole::O, l, H, Hq * D);
      lw.qkv = linear({&q, &k, &v}, bias);
      Tensor o_bias;
      if (cfg_.o_bias) {
        const Tensor ob = get(WeightRole::OBias, l, H, 0);
        o_bias = vector_f32({&ob});
      }
      lw.o = linear({&o}, o_bias, Hq * D);
      if (cfg_.is_moe_layer(l)) {
        lw.moe = true;
        const Tensor router = get(WeightRole::Router, l, cfg_.num_experts, H);
        lw.router = linear({&router}, Tensor());
        lw.experts = experts(l);
      } else {
        const Tensor gate = get(WeightRole::Gate, l, F, H), up = get(WeightRole::Up, l, F, H),
                     down = get(WeightRole::Down, l, H, F);
        lw.gate_up = linear({&gate, &up}, Tensor());
        lw.down = linear({&down}, Tensor(), F);
      }
      w_.layers.push_back(std::move(lw));
    }
  }

 private:
  const ModelConfig& cfg_;
  const WeightSource& src_;
  ops::Backend& be_;
  Weights& w_;
  TpShard shard_;
  uint64_t random_count_ = 0;

  // A dummy vocabulary shard's rows past its own are the zero rows other ranks' token ids read
  // (tp_shard.h).
  void zero_rows_from(const Tensor& t, int64_t r0) {
    std::vector<uint8_t> zeros(size_t(t.rows() - r0) * t.row_nbytes(), 0);
    be_.copy_to_device(t.row(r0), zeros.data(), zeros.size());
    be_.synchronize();
  }
};

}  // namespace

std::unique_ptr<WeightSource> gguf_weight_source(std::shared_ptr<const gguf::File> f) {
  return std::make_unique<GgufSource>(std::move(f));
}

std::unique_ptr<WeightSource> hf_weight_source(std::shared_ptr<const safetensors::Archive> a,
                                               const QuantConfig& quant) {
  return std::make_unique<HfSource>(std::move(a), quant);
}

std::unique_ptr<WeightSource> dummy_weight_source(const ModelConfig& cfg, uint64_t seed) {
  return std::make_unique<DummySource>(cfg, seed);
}

Weights load_weights(const ModelConfig& cfg, const WeightSource& src, ops::Backend& backend, TpShard shard) {
  Weights w;
  Loader(cfg, src, backend, w, shard).load();
  if (backend.device() == Device::CPU) {
    // CPU weights stay in the mapping: count the bytes the model reads per token.
    auto add = [&](const Tensor& t) { w.device_bytes += t.data ? t.nbytes() : 0; };
    auto add_lin = [&](const ops::Linear& l) {
      for (const Tensor& p : l.parts) add(p);
      add(l.bias);
    };
    add(w.embed);
    if (!cfg.tie_word_embeddings) add_lin(w.lm_head);
    for (const LayerWeights& l : w.layers) {
      add_lin(l.qkv), add_lin(l.o), add_lin(l.gate_up), add_lin(l.down), add_lin(l.router);
      for (const auto* list : {&l.experts.gate, &l.experts.up, &l.experts.down})
        for (const Tensor& t : *list) add(t);
    }
  } else {
    for (const Buffer& b : w.keep)
      if (b.device() != Device::CPU) w.device_bytes += b.size();
  }
  return w;
}

int64_t count_parameters(const ModelConfig& c) {
  const int64_t H = c.hidden_size, D = c.head_dim;
  int64_t per_layer = H * (c.num_heads * D) * 2 + H * (c.num_kv_heads * D) * 2 + 2 * H;
  if (c.qkv_bias) per_layer += (c.num_heads + 2 * c.num_kv_heads) * D;
  if (c.qk_norm) per_layer += 2 * D;
  if (c.o_bias) per_layer += H;
  int64_t n = c.num_layers * per_layer + c.vocab_size * H + H;
  for (int64_t l = 0; l < c.num_layers; ++l)  // MLPs: router and experts, or one dense SwiGLU
    n += c.is_moe_layer(l) ? c.num_experts * (3 * H * c.moe_intermediate_size + H) : 3 * H * c.intermediate_size;
  if (!c.tie_word_embeddings) n += c.vocab_size * H;
  return n;
}

}  // namespace lite_llama

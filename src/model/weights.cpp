#include "model/weights.h"

#include <cstring>
#include <map>

#include "core/error.h"
#include "core/quant.h"
#include "io/gguf.h"

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

 private:
  std::shared_ptr<const gguf::File> f_;
  std::map<std::string, Tensor> views_;
};

class Loader {
 public:
  Loader(const ModelConfig& c, const WeightSource& s, ops::Backend& b, Weights& w)
      : cfg_(c), src_(s), be_(b), w_(w) {}

  const Tensor& get(WeightRole r, int l, int64_t rows, int64_t cols) {
    const Tensor* t = src_.find(r, l);
    LL_CHECK(t != nullptr, "{}: missing tensor '{}'", src_.path(), src_.tensor_name(r, l));
    bool ok = (cols == 0 && t->ndim == 1 && t->shape[0] == rows) ||
              (cols > 0 && t->ndim == 2 && t->shape[0] == rows && t->shape[1] == cols);
    LL_CHECK(ok, "{}: tensor '{}' has shape {}, expected [{}{}]", src_.path(),
             src_.tensor_name(r, l), t->shape_str(), rows, cols ? fmt::format(", {}", cols) : "");
    return *t;
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
  Tensor norm(WeightRole r, int l, int64_t n) { return vector_f32({&get(r, l, n, 0)}); }

  ops::Linear linear(std::initializer_list<const Tensor*> parts, Tensor bias) {
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
    w_.embed = be_.prepare_weight(get(WeightRole::Embed, -1, V, H), w_.keep);
    w_.final_norm = norm(WeightRole::FinalNorm, -1, H);
    if (cfg_.tie_word_embeddings) {
      // Reuse the prepared embedding: a tied head costs no second copy on any device.
      w_.lm_head.parts = {w_.embed};
      w_.lm_head.in_features = H;
      w_.lm_head.out_features = V;
    } else {
      w_.lm_head = linear({&get(WeightRole::LmHead, -1, V, H)}, Tensor());
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
      if (cfg_.qkv_bias)
        bias = vector_f32({&get(WeightRole::QBias, l, Hq * D, 0), &get(WeightRole::KBias, l, Hkv * D, 0),
                           &get(WeightRole::VBias, l, Hkv * D, 0)});
      lw.qkv = linear({&get(WeightRole::Q, l, Hq * D, H), &get(WeightRole::K, l, Hkv * D, H),
                       &get(WeightRole::V, l, Hkv * D, H)},
                      bias);
      lw.o = linear({&get(WeightRole::O, l, H, Hq * D)}, Tensor());
      lw.gate_up = linear({&get(WeightRole::Gate, l, F, H), &get(WeightRole::Up, l, F, H)}, Tensor());
      lw.down = linear({&get(WeightRole::Down, l, H, F)}, Tensor());
      w_.layers.push_back(std::move(lw));
    }
  }

 private:
  const ModelConfig& cfg_;
  const WeightSource& src_;
  ops::Backend& be_;
  Weights& w_;
};

}  // namespace

std::unique_ptr<WeightSource> gguf_weight_source(std::shared_ptr<const gguf::File> f) {
  return std::make_unique<GgufSource>(std::move(f));
}

Weights load_weights(const ModelConfig& cfg, const WeightSource& src, ops::Backend& backend) {
  Weights w;
  Loader(cfg, src, backend, w).load();
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
      add_lin(l.qkv), add_lin(l.o), add_lin(l.gate_up), add_lin(l.down);
    }
  } else {
    for (const Buffer& b : w.keep)
      if (b.device() != Device::CPU) w.device_bytes += b.size();
  }
  return w;
}

int64_t count_parameters(const ModelConfig& c) {
  const int64_t H = c.hidden_size, D = c.head_dim;
  int64_t per_layer = H * (c.num_heads * D) * 2 + H * (c.num_kv_heads * D) * 2 +
                      3 * H * c.intermediate_size + 2 * H;
  if (c.qkv_bias) per_layer += (c.num_heads + 2 * c.num_kv_heads) * D;
  if (c.qk_norm) per_layer += 2 * D;
  int64_t n = c.num_layers * per_layer + c.vocab_size * H + H;
  if (!c.tie_word_embeddings) n += c.vocab_size * H;
  return n;
}

}  // namespace lite_llama

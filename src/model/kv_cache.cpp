#include "model/kv_cache.h"

#include "core/error.h"

namespace lite_llama {

KvCache::KvCache(const ModelConfig& cfg, ops::Backend& backend, int64_t num_slots, int max_reqs,
                 int max_ctx)
    : num_slots_(num_slots), max_reqs_(max_reqs), max_ctx_(max_ctx) {
  LL_CHECK(num_slots > 0 && max_reqs > 0 && max_ctx > 0,
           "KV cache needs positive sizes (slots {}, requests {}, context {})", num_slots,
           max_reqs, max_ctx);
  const DType dt = backend.kv_dtype();
  const int64_t row = cfg.num_kv_heads * cfg.head_dim;
  const size_t elem = dtype_info(dt).block_bytes;
  const size_t per_layer = size_t(num_slots) * size_t(row) * elem;
  storage_ = backend.alloc(per_layer * 2 * size_t(cfg.num_layers));
  table_ = backend.alloc(size_t(max_reqs) * size_t(max_ctx) * sizeof(int32_t));
  auto* base = storage_.as<uint8_t>();
  for (int64_t l = 0; l < cfg.num_layers; ++l) {
    ops::KvLayer kv;
    kv.k = Tensor(base + size_t(2 * l) * per_layer, dt, {num_slots, cfg.num_kv_heads, cfg.head_dim},
                  backend.device());
    kv.v = Tensor(base + size_t(2 * l + 1) * per_layer, dt,
                  {num_slots, cfg.num_kv_heads, cfg.head_dim}, backend.device());
    layers_.push_back(kv);
  }
}

}  // namespace lite_llama

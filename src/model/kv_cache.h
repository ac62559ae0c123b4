// Device storage of the token-level KV pool: per layer, K and V rows indexed by slot, plus the
// request -> slot table the attention kernels read. Which slot belongs to whom is decided on the
// host by kv::KvPool (integers only); this class only holds the memory.
#pragma once
#include <cstdint>
#include <vector>

#include "model/model_config.h"
#include "ops/ops.h"

namespace lite_llama {

class KvCache {
 public:
  KvCache(const ModelConfig& cfg, ops::Backend& backend, int64_t num_slots, int max_reqs,
          int max_ctx);

  ops::KvLayer layer(int l) const { return layers_[size_t(l)]; }
  int32_t* req_to_slot() const { return table_.as<int32_t>(); }
  int req_stride() const { return max_ctx_; }
  int64_t num_slots() const { return num_slots_; }
  int max_reqs() const { return max_reqs_; }
  int max_ctx() const { return max_ctx_; }
  size_t bytes() const { return storage_.size() + table_.size(); }

 private:
  int64_t num_slots_;
  int max_reqs_, max_ctx_;
  Buffer storage_, table_;
  std::vector<ops::KvLayer> layers_;
};

}  // namespace lite_llama

// Event-based per-op timing for `lite-llama bench --profile`: each op enqueues an event pair;
// report() waits once and sums the elapsed times by op family. Eager mode only (not in graphs).
#pragma once
#include <cuda_runtime.h>

#include <map>
#include <string>
#include <vector>

#include "ops/ops.h"

namespace lite_llama::cuda {

class OpProfiler {
 public:
  ~OpProfiler();
  void enable(bool on);
  bool enabled() const { return on_; }
  void begin(const char* family, cudaStream_t s);
  void end(cudaStream_t s);
  std::vector<ops::Backend::ProfileEntry> report();

 private:
  cudaEvent_t event();
  struct Span {
    const char* family;
    cudaEvent_t a, b;
  };
  bool on_ = false;
  std::vector<cudaEvent_t> free_;
  std::vector<Span> spans_;
  std::map<std::string, ops::Backend::ProfileEntry> totals_;
};

// Scope guard: times the op family of the enclosing backend method.
class ProfileScope {
 public:
  ProfileScope(OpProfiler& p, const char* family, cudaStream_t s) : p_(p), s_(s) {
    if (p_.enabled()) p_.begin(family, s_);
  }
  ~ProfileScope() {
    if (p_.enabled()) p_.end(s_);
  }

 private:
  OpProfiler& p_;
  cudaStream_t s_;
};

}  // namespace lite_llama::cuda

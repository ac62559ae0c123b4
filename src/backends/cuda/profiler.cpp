#include "backends/cuda/profiler.h"

#include "backends/cuda/cuda_check.h"

namespace lite_llama::cuda {

OpProfiler::~OpProfiler() {
  for (auto& s : spans_) free_.push_back(s.a), free_.push_back(s.b);
  for (cudaEvent_t e : free_) cudaEventDestroy(e);
}

cudaEvent_t OpProfiler::event() {
  if (!free_.empty()) {
    cudaEvent_t e = free_.back();
    free_.pop_back();
    return e;
  }
  cudaEvent_t e;
  LL_CUDA(cudaEventCreate(&e));
  return e;
}

void OpProfiler::enable(bool on) {
  on_ = on;
  if (on) totals_.clear();
}

void OpProfiler::begin(const char* family, cudaStream_t s) {
  Span sp{family, event(), event()};
  LL_CUDA(cudaEventRecord(sp.a, s));
  spans_.push_back(sp);
}

void OpProfiler::end(cudaStream_t s) { LL_CUDA(cudaEventRecord(spans_.back().b, s)); }

std::vector<ops::Backend::ProfileEntry> OpProfiler::report() {
  for (Span& sp : spans_) {
    LL_CUDA(cudaEventSynchronize(sp.b));
    float ms = 0;
    LL_CUDA(cudaEventElapsedTime(&ms, sp.a, sp.b));
    auto& t = totals_[sp.family];
    t.family = sp.family;
    t.ms += ms;
    ++t.calls;
    free_.push_back(sp.a);
    free_.push_back(sp.b);
  }
  spans_.clear();
  std::vector<ops::Backend::ProfileEntry> out;
  for (auto& [k, v] : totals_) out.push_back(v);
  return out;
}

}  // namespace lite_llama::cuda

// CUDA graphs captured on the backend's stream (one per decode batch bucket), replayed by id.
#pragma once
#include <cuda_runtime.h>

#include <functional>
#include <vector>

namespace lite_llama::cuda {

class GraphSet {
 public:
  explicit GraphSet(cudaStream_t s) : stream_(s) {}
  ~GraphSet();
  GraphSet(const GraphSet&) = delete;
  GraphSet& operator=(const GraphSet&) = delete;

  int capture(const std::function<void()>& fn);  // the id of the new graph
  void replay(int id);

 private:
  cudaStream_t stream_;
  std::vector<cudaGraphExec_t> graphs_;
};

}  // namespace lite_llama::cuda

#include "backends/cuda/graphs.h"

#include "backends/cuda/cuda_check.h"

namespace lite_llama::cuda {

GraphSet::~GraphSet() {
  for (cudaGraphExec_t g : graphs_) cudaGraphExecDestroy(g);
}

int GraphSet::capture(const std::function<void()>& fn) {
  cudaGraph_t g = nullptr;
  LL_CUDA(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
  try {
    fn();
  } catch (...) {
    cudaStreamEndCapture(stream_, &g);
    if (g) cudaGraphDestroy(g);
    throw;
  }
  LL_CUDA(cudaStreamEndCapture(stream_, &g));
  cudaGraphExec_t exec = nullptr;
  LL_CUDA(cudaGraphInstantiate(&exec, g, 0));
  cudaGraphDestroy(g);
  graphs_.push_back(exec);
  return int(graphs_.size()) - 1;
}

void GraphSet::replay(int id) { LL_CUDA(cudaGraphLaunch(graphs_.at(size_t(id)), stream_)); }

}  // namespace lite_llama::cuda

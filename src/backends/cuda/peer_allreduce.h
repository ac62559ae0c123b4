// The one-shot peer all-reduce's memory (kernels/allreduce.cu): per rank a signal block and two
// staging buffers on its own device, every rank's pointers known to every rank. Made for all
// ranks at once, from one thread, where every pair of devices has peer access; each rank's part
// is then freed by that rank's backend.
#pragma once
#include <cuda_runtime.h>

#include <memory>
#include <vector>

#include "backends/cuda/launchers.h"
#include "core/dtype.h"

namespace lite_llama::cuda {

class PeerAllReduce {
 public:
  // One per rank of devices 0..n-1, staging messages of up to max_bytes; empty where some pair
  // of devices has no peer access or max_bytes == 0 (NCCL then does every all-reduce).
  static std::vector<std::shared_ptr<PeerAllReduce>> create_all(int n, size_t max_bytes);
  ~PeerAllReduce();
  PeerAllReduce(const PeerAllReduce&) = delete;
  PeerAllReduce& operator=(const PeerAllReduce&) = delete;

  // Messages this kernel takes: F32 / F16 / BF16, whole 16-byte units, at most max_bytes.
  bool takes(size_t bytes, DType dt) const;
  void run(void* x, size_t bytes, DType dt, cudaStream_t s);
  // The fused all-reduce + residual add + RMSNorm: fp32 x and residual [rows, n], n % 4 == 0,
  // n <= 8192, rows * n * 4 <= max_bytes. pdl: launched with PDL after the projection (sm_90+);
  // batch_poll: the low-latency channel polls a thread's lines together (peer_ll_batch_poll).
  bool takes_norm(int rows, int n) const;
  void run_add_rms_norm(void* x, int rows, int n, float* residual, const float* w, float eps, Act act, void* out,
                        cudaStream_t s, bool pdl = false, bool batch_poll = false);

 private:
  PeerAllReduce() = default;
  PeerArArgs args_, norm_args_;  // two channels: their blocks own different units
  PeerLLArgs ll_args_;            // the fused norm's low-latency channel for small messages
  size_t max_bytes_ = 0;
  void* own_ = nullptr;  // this rank's allocation: signal, then the two staging buffers
  void* own_ll_ = nullptr;  // its low-latency receive buffers, then their call counters
};

}  // namespace lite_llama::cuda

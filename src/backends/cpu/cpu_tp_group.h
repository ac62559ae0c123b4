// Tensor parallelism on the CPU: the ranks are threads of one process, each with a CpuBackend of
// its own, and a collective waits for every rank's call, then each rank sums (or copies) its own
// share of the elements over all ranks' buffers. It stands in for NCCL so that the sharded
// forward runs in CI against the unsharded one.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <vector>

namespace lite_llama::cpu {

class CpuTpGroup {
 public:
  explicit CpuTpGroup(int size);
  int size() const { return size_; }
  // x = sum over ranks of x (n floats each), summed in rank order on every rank.
  void all_reduce(int rank, float* x, int64_t n);
  // out[i, r * cols + j] = rank r's local[i * ld + j] for j < cols and r * cols + j < out_cols.
  void all_gather_cols(int rank, const float* local, int64_t ld, int64_t cols, float* out, int64_t rows,
                       int64_t out_cols);

 private:
  // Posts this rank's pointer and waits for all ranks; a second wait ends the collective.
  void arrive(int rank, const void* p);
  void wait_all();

  const int size_;
  std::mutex m_;
  std::condition_variable cv_;
  int arrived_ = 0;
  uint64_t phase_ = 0;
  std::vector<const void*> ptr_;
};

}  // namespace lite_llama::cpu

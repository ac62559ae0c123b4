// NCCL communicators of one process's tensor-parallel ranks, rank r on CUDA device r. Built
// where NCCL was found at configure time (LL_HAVE_NCCL); elsewhere create_all fails in one line.
#pragma once
#include <cuda_runtime.h>

#include <memory>
#include <vector>

#include "core/dtype.h"

namespace lite_llama::cuda {

class NcclComm {
 public:
  // Communicators over devices 0..n-1, each warmed up by one all-reduce (NCCL connects its peers
  // lazily, which must not happen inside a graph capture). NVLink multicast stays off unless the
  // environment already says otherwise (it can take a shared host's GPUs out of service).
  static std::vector<std::shared_ptr<NcclComm>> create_all(int n);
  ~NcclComm();
  NcclComm(const NcclComm&) = delete;
  NcclComm& operator=(const NcclComm&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  // In place sum over the ranks of `count` elements of F32, F16 or BF16, on `s`.
  void all_reduce(void* x, size_t count, DType dt, cudaStream_t s);
  // recv[r * count + i] = rank r's send[i] (F32), on `s`.
  void all_gather(const void* send, void* recv, size_t count, cudaStream_t s);

 private:
  NcclComm(void* comm, int rank, int size) : comm_(comm), rank_(rank), size_(size) {}
  void* comm_;  // ncclComm_t: nccl.h stays inside nccl_comm.cpp
  int rank_, size_;
};

}  // namespace lite_llama::cuda

#include "backends/cuda/nccl_comm.h"

#include <cstdlib>

#include "backends/cuda/cuda_check.h"

#ifdef LL_HAVE_NCCL
#include <nccl.h>

#define LL_NCCL(call)                                                                              \
  do {                                                                                             \
    ncclResult_t r_ = (call);                                                                      \
    if (r_ != ncclSuccess)                                                                         \
      ::lite_llama::fail("NCCL error {} ({}) at {}:{}: {}", int(r_), ncclGetErrorString(r_), __FILE__, \
                         __LINE__, #call);                                                         \
  } while (0)
#endif

namespace lite_llama::cuda {

#ifdef LL_HAVE_NCCL
namespace {

ncclComm_t comm_of(void* c) { return static_cast<ncclComm_t>(c); }

ncclDataType_t nccl_type(DType dt) {
  switch (dt) {
    case DType::F32: return ncclFloat32;
    case DType::F16: return ncclFloat16;
    case DType::BF16: return ncclBfloat16;
    default: fail("all-reduce of {} tensors is not supported", dtype_name(dt));
  }
}

}  // namespace

std::vector<std::shared_ptr<NcclComm>> NcclComm::create_all(int n) {
  setenv("NCCL_NVLS_ENABLE", "0", 0);
  int prev = 0;
  LL_CUDA(cudaGetDevice(&prev));
  std::vector<ncclComm_t> comms(static_cast<size_t>(n), nullptr);
  std::vector<int> devs(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) devs[size_t(r)] = r;
  LL_NCCL(ncclCommInitAll(comms.data(), n, devs.data()));
  std::vector<std::shared_ptr<NcclComm>> out;
  for (int r = 0; r < n; ++r) out.push_back(std::shared_ptr<NcclComm>(new NcclComm(comms[size_t(r)], r, n)));
  // Warm-up: one grouped all-reduce from this thread connects every pair of ranks.
  std::vector<float*> buf(static_cast<size_t>(n), nullptr);
  for (int r = 0; r < n; ++r) {
    LL_CUDA(cudaSetDevice(r));
    LL_CUDA(cudaMalloc(&buf[size_t(r)], 4096 * sizeof(float)));
    LL_CUDA(cudaMemset(buf[size_t(r)], 0, 4096 * sizeof(float)));
  }
  LL_NCCL(ncclGroupStart());
  for (int r = 0; r < n; ++r) {
    LL_CUDA(cudaSetDevice(r));
    LL_NCCL(ncclAllReduce(buf[size_t(r)], buf[size_t(r)], 4096, ncclFloat32, ncclSum, comms[size_t(r)], nullptr));
  }
  LL_NCCL(ncclGroupEnd());
  for (int r = 0; r < n; ++r) {
    LL_CUDA(cudaSetDevice(r));
    LL_CUDA(cudaDeviceSynchronize());
    LL_CUDA(cudaFree(buf[size_t(r)]));
  }
  LL_CUDA(cudaSetDevice(prev));
  return out;
}

NcclComm::~NcclComm() { ncclCommDestroy(comm_of(comm_)); }

void NcclComm::all_reduce(void* x, size_t count, DType dt, cudaStream_t s) {
  LL_NCCL(ncclAllReduce(x, x, count, nccl_type(dt), ncclSum, comm_of(comm_), s));
}

void NcclComm::all_gather(const void* send, void* recv, size_t count, cudaStream_t s) {
  LL_NCCL(ncclAllGather(send, recv, count, ncclFloat32, comm_of(comm_), s));
}

#else

std::vector<std::shared_ptr<NcclComm>> NcclComm::create_all(int n) {
  fail("--tp {}: this build has no NCCL (install NCCL, e.g. libnccl-dev, and rebuild)", n);
}
NcclComm::~NcclComm() = default;
void NcclComm::all_reduce(void*, size_t, DType, cudaStream_t) {}
void NcclComm::all_gather(const void*, void*, size_t, cudaStream_t) {}

#endif

}  // namespace lite_llama::cuda

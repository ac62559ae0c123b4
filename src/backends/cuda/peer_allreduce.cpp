#include "backends/cuda/peer_allreduce.h"

#include "backends/cuda/cuda_check.h"

namespace lite_llama::cuda {

std::vector<std::shared_ptr<PeerAllReduce>> PeerAllReduce::create_all(int n, size_t max_bytes) {
  std::vector<std::shared_ptr<PeerAllReduce>> out;
  if (max_bytes == 0 || n < 2 || n > kPeerArMaxRanks) return out;
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j) {
      int ok = 0;
      if (i != j && (cudaDeviceCanAccessPeer(&ok, i, j) != cudaSuccess || !ok)) return out;
    }
  int prev = 0;
  LL_CUDA(cudaGetDevice(&prev));
  max_bytes = (max_bytes + 255) / 256 * 256;
  const size_t sig = (sizeof(PeerArSignal) + 255) / 256 * 256;
  PeerArArgs shared, norm;
  shared.size = norm.size = n;
  for (int r = 0; r < n; ++r) {
    LL_CUDA(cudaSetDevice(r));
    for (int p = 0; p < n; ++p) {
      if (p == r) continue;
      const cudaError_t e = cudaDeviceEnablePeerAccess(p, 0);
      if (e == cudaErrorPeerAccessAlreadyEnabled) cudaGetLastError();
      else LL_CUDA(e);
    }
    auto* ar = new PeerAllReduce();
    out.emplace_back(ar);
    ar->max_bytes_ = max_bytes;
    LL_CUDA(cudaMalloc(&ar->own_, 2 * (sig + 2 * max_bytes)));
    LL_CUDA(cudaMemset(ar->own_, 0, 2 * (sig + 2 * max_bytes)));
    auto* base = static_cast<uint8_t*>(ar->own_);
    for (PeerArArgs* c : {&shared, &norm}) {
      c->signal[r] = reinterpret_cast<PeerArSignal*>(base);
      c->staging[r][0] = base + sig;
      c->staging[r][1] = base + sig + max_bytes;
      base += sig + 2 * max_bytes;
    }
  }
  for (int r = 0; r < n; ++r) {
    out[size_t(r)]->args_ = shared;
    out[size_t(r)]->args_.rank = r;
    out[size_t(r)]->norm_args_ = norm;
    out[size_t(r)]->norm_args_.rank = r;
    LL_CUDA(cudaSetDevice(r));
    LL_CUDA(cudaDeviceSynchronize());  // the zeroed signals before any rank's first call
  }
  LL_CUDA(cudaSetDevice(prev));
  return out;
}

PeerAllReduce::~PeerAllReduce() {
  if (own_) cudaFree(own_);
}

bool PeerAllReduce::takes(size_t bytes, DType dt) const {
  return bytes <= max_bytes_ && bytes % 16 == 0 && (dt == DType::F32 || dt == DType::F16 || dt == DType::BF16);
}

bool PeerAllReduce::takes_norm(int rows, int n) const {
  return n % 4 == 0 && n <= 16 * kPeerArThreads && size_t(rows) * size_t(n) * 4 <= max_bytes_;
}

void PeerAllReduce::run_add_rms_norm(void* x, int rows, int n, float* residual, const float* w, float eps, Act act,
                                     void* out, cudaStream_t s) {
  PeerArArgs a = norm_args_;
  a.x = x;
  a.units = int64_t(rows) * n / 4;
  LL_CUDA(peer_all_reduce_add_rms_norm(a, act, rows, n, residual, w, eps, out, s));
}

void PeerAllReduce::run(void* x, size_t bytes, DType dt, cudaStream_t s) {
  PeerArArgs a = args_;
  a.x = x;
  a.units = int64_t(bytes / 16);
  LL_CUDA(peer_all_reduce(a, dt == DType::F32 ? 0 : dt == DType::F16 ? 1 : 2, s));
}

}  // namespace lite_llama::cuda

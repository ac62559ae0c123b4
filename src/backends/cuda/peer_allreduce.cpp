#include "backends/cuda/peer_allreduce.h"

#include <algorithm>

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
  // Low-latency lines carry 8 payload bytes each: up to 1 MiB of payload (64 rows of 4,096).
  PeerLLArgs ll;
  ll.size = n;
  ll.cap_lines = int64_t(std::min<size_t>(max_bytes, size_t(1) << 20) / 8);
  const size_t ll_bytes = 2 * size_t(n) * size_t(ll.cap_lines) * 16;
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
    // Zeroed lines hold call number 0, which no call uses.
    LL_CUDA(cudaMalloc(&ar->own_ll_, ll_bytes + kPeerArBlocks * sizeof(uint32_t)));
    LL_CUDA(cudaMemset(ar->own_ll_, 0, ll_bytes + kPeerArBlocks * sizeof(uint32_t)));
    ll.recv[r] = ar->own_ll_;
  }
  for (int r = 0; r < n; ++r) {
    out[size_t(r)]->args_ = shared;
    out[size_t(r)]->args_.rank = r;
    out[size_t(r)]->norm_args_ = norm;
    out[size_t(r)]->norm_args_.rank = r;
    out[size_t(r)]->ll_args_ = ll;
    out[size_t(r)]->ll_args_.rank = r;
    out[size_t(r)]->ll_args_.counter =
        reinterpret_cast<uint32_t*>(static_cast<uint8_t*>(out[size_t(r)]->own_ll_) + ll_bytes);
    LL_CUDA(cudaSetDevice(r));
    LL_CUDA(cudaDeviceSynchronize());  // the zeroed signals before any rank's first call
  }
  LL_CUDA(cudaSetDevice(prev));
  return out;
}

PeerAllReduce::~PeerAllReduce() {
  if (own_) cudaFree(own_);
  if (own_ll_) cudaFree(own_ll_);
}

bool PeerAllReduce::takes(size_t bytes, DType dt) const {
  return bytes <= max_bytes_ && bytes % 16 == 0 && (dt == DType::F32 || dt == DType::F16 || dt == DType::BF16);
}

bool PeerAllReduce::takes_norm(int rows, int n) const {
  return n % 4 == 0 && n <= 16 * kPeerArThreads && size_t(rows) * size_t(n) * 4 <= max_bytes_;
}

void PeerAllReduce::run_add_rms_norm(void* x, int rows, int n, float* residual, const float* w, float eps, Act act,
                                     void* out, cudaStream_t s, bool pdl, bool batch_poll) {
  if (int64_t(rows) * n / 2 <= ll_args_.cap_lines) {
    LL_CUDA(peer_ll_all_reduce_add_rms_norm(ll_args_, act, static_cast<const float*>(x), rows, n, residual, w, eps,
                                            out, s, pdl, batch_poll));
    return;
  }
  PeerArArgs a = norm_args_;
  a.x = x;
  a.units = int64_t(rows) * n / 4;
  LL_CUDA(peer_all_reduce_add_rms_norm(a, act, rows, n, residual, w, eps, out, s, pdl));
}

void PeerAllReduce::run(void* x, size_t bytes, DType dt, cudaStream_t s) {
  PeerArArgs a = args_;
  a.x = x;
  a.units = int64_t(bytes / 16);
  LL_CUDA(peer_all_reduce(a, dt == DType::F32 ? 0 : dt == DType::F16 ? 1 : 2, s));
}

}  // namespace lite_llama::cuda

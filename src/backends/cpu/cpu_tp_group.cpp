#include "backends/cpu/cpu_tp_group.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"

namespace lite_llama::cpu {

CpuTpGroup::CpuTpGroup(int size) : size_(size), ptr_(size_t(size), nullptr) {
  LL_CHECK(size >= 1, "a tensor-parallel group needs at least one rank");
}

void CpuTpGroup::wait_all() {
  std::unique_lock<std::mutex> lk(m_);
  const uint64_t phase = phase_;
  if (++arrived_ == size_) {
    arrived_ = 0;
    ++phase_;
    cv_.notify_all();
    return;
  }
  cv_.wait(lk, [&] { return phase_ != phase; });
}

void CpuTpGroup::arrive(int rank, const void* p) {
  {
    std::lock_guard<std::mutex> lk(m_);
    ptr_[size_t(rank)] = p;
  }
  wait_all();
}

void CpuTpGroup::all_reduce(int rank, float* x, int64_t n) {
  arrive(rank, x);
  // Disjoint element ranges: each rank reads and writes only its own share of every buffer.
  const int64_t per = (n + size_ - 1) / size_, lo = std::min(n, rank * per), hi = std::min(n, lo + per);
  for (int64_t i = lo; i < hi; ++i) {
    float s = 0;
    for (int r = 0; r < size_; ++r) s += static_cast<const float*>(ptr_[size_t(r)])[i];
    for (int r = 0; r < size_; ++r) const_cast<float*>(static_cast<const float*>(ptr_[size_t(r)]))[i] = s;
  }
  wait_all();
}

void CpuTpGroup::all_gather_cols(int rank, const float* local, int64_t ld, int64_t cols, float* out,
                                 int64_t rows, int64_t out_cols) {
  arrive(rank, local);
  for (int r = 0; r < size_; ++r) {
    const int64_t c0 = int64_t(r) * cols, w = std::max<int64_t>(0, std::min(cols, out_cols - c0));
    const float* src = static_cast<const float*>(ptr_[size_t(r)]);
    for (int64_t i = 0; i < rows && w > 0; ++i)
      std::memcpy(out + i * out_cols + c0, src + i * ld, size_t(w) * sizeof(float));
  }
  wait_all();
}

}  // namespace lite_llama::cpu

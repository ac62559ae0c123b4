// CudaTuning::check_finite (debugging): each op's output is copied back and checked, and the
// first NaN / inf stops the run naming the op. Eager steps only: skipped under graph capture.
#pragma once
#include "backends/cuda/device.h"

namespace lite_llama::cuda {

class FiniteCheck {
 public:
  FiniteCheck(CudaDevice& dev, bool on) : dev_(dev), on_(on) {}
  void operator()(const char* op, const Tensor& t) {
    if (on_) check(op, t);
  }

 private:
  void check(const char* op, const Tensor& t);
  CudaDevice& dev_;
  const bool on_;
  int64_t checked_ops_ = 0;
};

}  // namespace lite_llama::cuda

// CudaTuning::check_finite (debugging): each op's output is copied back and checked, and the
// first NaN / inf stops the run naming the op. The range probe (the load-time choice of the
// activation type) instead records the largest |value| of the 16-bit outputs. Eager steps only:
// skipped under graph capture.
#pragma once
#include "backends/cuda/device.h"

namespace lite_llama::cuda {

class FiniteCheck {
 public:
  FiniteCheck(CudaDevice& dev, bool on) : dev_(dev), on_(on) {}
  void operator()(const char* op, const Tensor& t) {
    if (on_ || probing_) check(op, t);
  }
  // Starts (and resets) or stops recording; max_abs() is +inf once any output was not finite.
  void probe(bool on) { probing_ = on, max_abs_ = 0.0; }
  double max_abs() const { return max_abs_; }

 private:
  void check(const char* op, const Tensor& t);
  CudaDevice& dev_;
  const bool on_;
  bool probing_ = false;
  double max_abs_ = 0.0;
  int64_t checked_ops_ = 0;
};

}  // namespace lite_llama::cuda

#include "kernels/cuda_test_util.h"

#include <cuda_runtime.h>

#include <cstdio>

namespace lite_llama::kt {

void settle(ops::Backend& be) {
  be.synchronize();
  const cudaError_t e = cudaDeviceSynchronize();
  ASSERT_EQ(e, cudaSuccess) << cudaGetErrorString(e);
}

namespace {

double g_rel_l2_frac = 0, g_max_frac = 0;

// Prints, after each test, the worst fraction of the bounds seen (LL_KT_STATS=1 only).
class MarginPrinter : public ::testing::EmptyTestEventListener {
  void OnTestStart(const ::testing::TestInfo&) override { g_rel_l2_frac = g_max_frac = 0; }
  void OnTestEnd(const ::testing::TestInfo& t) override {
    std::printf("[  margin  ] %s.%s: worst rel-L2 %.3f of bound, worst max-abs %.3f of bound\n",
                t.test_suite_name(), t.name(), g_rel_l2_frac, g_max_frac);
  }
};

const bool g_registered = [] {
  if (std::getenv("LL_KT_STATS"))
    ::testing::UnitTest::GetInstance()->listeners().Append(new MarginPrinter);
  return true;
}();

}  // namespace

void note_margin(double rel_l2_frac, double max_frac) {
  g_rel_l2_frac = std::max(g_rel_l2_frac, rel_l2_frac);
  g_max_frac = std::max(g_max_frac, max_frac);
}

}  // namespace lite_llama::kt

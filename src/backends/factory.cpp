#include "backends/factory.h"

#include "backends/cpu/cpu_backend.h"
#include <algorithm>

#include "core/error.h"
#include "core/thread_pool.h"

#ifdef LL_HAVE_CUDA
#include "backends/cuda/cuda_backend.h"
#endif

namespace lite_llama {

bool cuda_built() {
#ifdef LL_HAVE_CUDA
  return true;
#else
  return false;
#endif
}

bool cuda_available() {
#ifdef LL_HAVE_CUDA
  return cuda::device_count() > 0;
#else
  return false;
#endif
}

namespace {

void check_cpu_quantize(const BackendOptions& o) {
  LL_CHECK(o.quantize == QuantMode::Auto || o.quantize == QuantMode::None,
           "--quantize {} needs the CUDA backend; on the CPU use a quantised GGUF file (Q8_0, Q4_K, ...)",
           quant_mode_name(o.quantize));
}

bool wants_cuda(const BackendOptions& o) {
  return o.device == DeviceKind::Cuda || (o.device == DeviceKind::Auto && cuda_available());
}

}  // namespace

std::vector<std::unique_ptr<ops::Backend>> make_backends(const BackendOptions& o, int tp) {
  LL_CHECK(tp >= 1 && tp <= 64, "--tp must be in 1..64, got {}", tp);
  std::vector<std::unique_ptr<ops::Backend>> out;
  if (tp == 1) {
    out.push_back(make_backend(o));
    return out;
  }
  if (wants_cuda(o)) {
#ifdef LL_HAVE_CUDA
    LL_CHECK(cuda::device_count() >= tp, "--tp {} needs {} CUDA devices, {} present", tp, tp, cuda::device_count());
    return cuda::make_cuda_tp_backends(o, tp);
#else
    fail("--device cuda: this build has no CUDA backend (configure with -DLITE_LLAMA_CUDA=ON)");
#endif
  }
  check_cpu_quantize(o);
  // --threads is the total: the ranks share the cores.
  const int threads = std::max(1, (o.threads > 0 ? o.threads : default_thread_count()) / tp);
  auto group = std::make_shared<cpu::CpuTpGroup>(tp);
  for (int r = 0; r < tp; ++r) out.push_back(cpu::make_cpu_backend(threads, o.cpu, group, r));
  return out;
}

std::unique_ptr<ops::Backend> make_backend(const BackendOptions& o) {
  const bool want_cuda = wants_cuda(o);
  if (want_cuda) {
#ifdef LL_HAVE_CUDA
    LL_CHECK(cuda_available(), "--device cuda: no CUDA device is present");
    return cuda::make_cuda_backend(o);
#else
    fail("--device cuda: this build has no CUDA backend (configure with -DLITE_LLAMA_CUDA=ON)");
#endif
  }
  check_cpu_quantize(o);
  const int threads = o.threads > 0 ? o.threads : default_thread_count();
  return cpu::make_cpu_backend(threads, o.cpu);
}

}  // namespace lite_llama

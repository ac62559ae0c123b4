#include "backends/factory.h"

#include "backends/cpu/cpu_backend.h"
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

std::unique_ptr<ops::Backend> make_backend(const BackendOptions& o) {
  const bool want_cuda = o.device == DeviceKind::Cuda || (o.device == DeviceKind::Auto && cuda_available());
  if (want_cuda) {
#ifdef LL_HAVE_CUDA
    LL_CHECK(cuda_available(), "--device cuda: no CUDA device is present");
    return cuda::make_cuda_backend(o);
#else
    fail("--device cuda: this build has no CUDA backend (configure with -DLITE_LLAMA_CUDA=ON)");
#endif
  }
  LL_CHECK(o.quantize == QuantMode::Auto || o.quantize == QuantMode::None,
           "--quantize {} needs the CUDA backend; on the CPU use a quantised GGUF file (Q8_0, Q4_K, ...)",
           quant_mode_name(o.quantize));
  const int threads = o.threads > 0 ? o.threads : default_thread_count();
  return cpu::make_cpu_backend(threads, o.cpu);
}

}  // namespace lite_llama

// cuBLASLt, loaded when the first CUDA backend needs it instead of at program start: linked
// normally, its load alone costs ~210 MiB of resident memory, which every CPU-only run of a CUDA
// build would pay (docs/benchmarks/cpu.md). These definitions of the cuBLASLt functions the
// backend calls (gemm.cpp) forward to the library opened with dlopen: the path CMake found at
// configure time, else the soname on the loader's path. A library that cannot be opened is a
// one-line error at the first GEMM plan.
#include <cublasLt.h>
#include <dlfcn.h>

#include "core/error.h"

#ifndef LL_CUBLASLT_PATH
#define LL_CUBLASLT_PATH "libcublasLt.so"
#endif

namespace {

void* cublaslt() {
  static void* const handle = [] {
    std::string errors;
    for (const char* name : {LL_CUBLASLT_PATH, "libcublasLt.so." LL_CUBLASLT_MAJOR, "libcublasLt.so"}) {
      if (void* h = dlopen(name, RTLD_NOW | RTLD_LOCAL)) return h;
      errors += std::string(errors.empty() ? "" : "; ") + dlerror();
    }
    lite_llama::fail("cannot load cuBLASLt: {}", errors);
  }();
  return handle;
}

template <typename F>
F symbol(F, const char* name) {
  void* p = dlsym(cublaslt(), name);
  LL_CHECK(p != nullptr, "cuBLASLt has no symbol {}", name);
  return reinterpret_cast<F>(p);
}

}  // namespace

// Each forwards to the library's own function, looked up once.
#define LL_LT(name, ...) static const auto real = symbol(&name, #name); return real(__VA_ARGS__)

extern "C" {

cublasStatus_t CUBLASWINAPI cublasLtCreate(cublasLtHandle_t* h) { LL_LT(cublasLtCreate, h); }
cublasStatus_t CUBLASWINAPI cublasLtDestroy(cublasLtHandle_t h) { LL_LT(cublasLtDestroy, h); }
size_t CUBLASWINAPI cublasLtGetVersion(void) { LL_LT(cublasLtGetVersion); }
size_t CUBLASWINAPI cublasLtGetCudartVersion(void) { LL_LT(cublasLtGetCudartVersion); }

cublasStatus_t CUBLASWINAPI cublasLtMatmul(cublasLtHandle_t h, cublasLtMatmulDesc_t desc, const void* alpha,
                                           const void* A, cublasLtMatrixLayout_t Adesc, const void* B,
                                           cublasLtMatrixLayout_t Bdesc, const void* beta, const void* C,
                                           cublasLtMatrixLayout_t Cdesc, void* D, cublasLtMatrixLayout_t Ddesc,
                                           const cublasLtMatmulAlgo_t* algo, void* workspace, size_t ws_bytes,
                                           cudaStream_t stream) {
  LL_LT(cublasLtMatmul, h, desc, alpha, A, Adesc, B, Bdesc, beta, C, Cdesc, D, Ddesc, algo, workspace, ws_bytes,
        stream);
}

cublasStatus_t CUBLASWINAPI cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* layout, cudaDataType type,
                                                       uint64_t rows, uint64_t cols, int64_t ld) {
  LL_LT(cublasLtMatrixLayoutCreate, layout, type, rows, cols, ld);
}
cublasStatus_t CUBLASWINAPI cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t layout) {
  LL_LT(cublasLtMatrixLayoutDestroy, layout);
}

cublasStatus_t CUBLASWINAPI cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* desc, cublasComputeType_t compute,
                                                     cudaDataType_t scale) {
  LL_LT(cublasLtMatmulDescCreate, desc, compute, scale);
}
cublasStatus_t CUBLASWINAPI cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t desc) {
  LL_LT(cublasLtMatmulDescDestroy, desc);
}
cublasStatus_t CUBLASWINAPI cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t desc,
                                                           cublasLtMatmulDescAttributes_t attr, const void* buf,
                                                           size_t bytes) {
  LL_LT(cublasLtMatmulDescSetAttribute, desc, attr, buf, bytes);
}

cublasStatus_t CUBLASWINAPI cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* pref) {
  LL_LT(cublasLtMatmulPreferenceCreate, pref);
}
cublasStatus_t CUBLASWINAPI cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref) {
  LL_LT(cublasLtMatmulPreferenceDestroy, pref);
}
cublasStatus_t CUBLASWINAPI cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t pref,
                                                                 cublasLtMatmulPreferenceAttributes_t attr,
                                                                 const void* buf, size_t bytes) {
  LL_LT(cublasLtMatmulPreferenceSetAttribute, pref, attr, buf, bytes);
}

cublasStatus_t CUBLASWINAPI cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t h, cublasLtMatmulDesc_t desc,
                                                           cublasLtMatrixLayout_t Adesc, cublasLtMatrixLayout_t Bdesc,
                                                           cublasLtMatrixLayout_t Cdesc, cublasLtMatrixLayout_t Ddesc,
                                                           cublasLtMatmulPreference_t pref, int requested,
                                                           cublasLtMatmulHeuristicResult_t results[], int* returned) {
  LL_LT(cublasLtMatmulAlgoGetHeuristic, h, desc, Adesc, Bdesc, Cdesc, Ddesc, pref, requested, results, returned);
}

cublasStatus_t CUBLASWINAPI cublasLtMatmulAlgoCheck(cublasLtHandle_t h, cublasLtMatmulDesc_t desc,
                                                    cublasLtMatrixLayout_t Adesc, cublasLtMatrixLayout_t Bdesc,
                                                    cublasLtMatrixLayout_t Cdesc, cublasLtMatrixLayout_t Ddesc,
                                                    const cublasLtMatmulAlgo_t* algo,
                                                    cublasLtMatmulHeuristicResult_t* result) {
  LL_LT(cublasLtMatmulAlgoCheck, h, desc, Adesc, Bdesc, Cdesc, Ddesc, algo, result);
}

}  // extern "C"

// Turns CUDA / cuBLAS status codes into lite_llama::Error naming the call and its site.
#pragma once
#include <cublasLt.h>
#include <cuda_runtime.h>

#include "core/error.h"

#define LL_CUDA(call)                                                                         \
  do {                                                                                        \
    cudaError_t e_ = (call);                                                                  \
    if (e_ != cudaSuccess)                                                                    \
      ::lite_llama::fail("CUDA error {} ({}) at {}:{}: {}", int(e_), cudaGetErrorString(e_),  \
                         __FILE__, __LINE__, #call);                                          \
  } while (0)

#define LL_CUBLAS(call)                                                                       \
  do {                                                                                        \
    cublasStatus_t s_ = (call);                                                               \
    if (s_ != CUBLAS_STATUS_SUCCESS)                                                          \
      ::lite_llama::fail("cuBLAS error {} at {}:{}: {}", int(s_), __FILE__, __LINE__, #call); \
  } while (0)

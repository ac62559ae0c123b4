# LITE_LLAMA_CUDA=AUTO builds the CUDA backend wherever nvcc exists (CI compiles it without a GPU).
set(LL_HAVE_CUDA OFF)
if(NOT LITE_LLAMA_CUDA STREQUAL "OFF")
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    # 90a: Hopper's wgmma, which the long-prefill attention kernel uses, exists only in
    # arch-specific code; 80 keeps Ampere on the mma.sync kernels; 90-virtual is the PTX that
    # newer GPUs compile at load (90a's is not portable, and 80's would drop the PDL waits that
    # the host's launches on sm_90+ rely on).
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES 80 90a 90-virtual)
    endif()
    enable_language(CUDA)
    find_package(CUDAToolkit REQUIRED)
    set(CMAKE_CUDA_STANDARD 17)  # CMake 3.25 does not know C++20 flags for nvcc 13
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    set(LL_HAVE_CUDA ON)
  elseif(LITE_LLAMA_CUDA STREQUAL "ON")
    message(FATAL_ERROR "LITE_LLAMA_CUDA=ON but no CUDA compiler was found")
  endif()
endif()
message(STATUS "lite-llama CUDA backend: ${LL_HAVE_CUDA}")

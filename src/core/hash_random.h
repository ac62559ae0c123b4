// Counter-based random numbers (splitmix64): value i of stream `seed` is the same on the host
// and on a GPU, so dummy weights are identical whichever backend generates them.
#pragma once
#include <cstdint>

#if defined(__CUDACC__)
#define LL_HD __host__ __device__ __forceinline__
#else
#define LL_HD inline
#endif

namespace lite_llama {

LL_HD uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Uniform in [-scale, scale).
LL_HD float hash_uniform(uint64_t seed, uint64_t i, float scale) {
  uint64_t r = splitmix64(seed ^ splitmix64(i));
  float u = float(r >> 40) * (1.0f / 16777216.0f);  // [0, 1) with 24 bits
  return (2.0f * u - 1.0f) * scale;
}

}  // namespace lite_llama

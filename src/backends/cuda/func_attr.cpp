#include "backends/cuda/func_attr.h"

#include <mutex>
#include <unordered_map>

namespace lite_llama::cuda {
namespace {

struct Key {
  int device;
  const void* kernel;
  int attr;
  bool operator==(const Key& o) const { return device == o.device && kernel == o.kernel && attr == o.attr; }
};
struct KeyHash {
  size_t operator()(const Key& k) const {
    return std::hash<const void*>()(k.kernel) ^ (size_t(k.device) << 48) ^ (size_t(k.attr) << 40);
  }
};

}  // namespace

cudaError_t set_func_attr(const void* kernel, cudaFuncAttribute attr, int value) {
  static std::mutex mu;
  static std::unordered_map<Key, int, KeyHash> set;
  int device = 0;
  if (cudaError_t e = cudaGetDevice(&device); e != cudaSuccess) return e;
  const Key key{device, kernel, int(attr)};
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = set.find(key); it != set.end() && it->second == value) return cudaSuccess;
  if (cudaError_t e = cudaFuncSetAttribute(kernel, attr, value); e != cudaSuccess) return e;
  set[key] = value;
  return cudaSuccess;
}

}  // namespace lite_llama::cuda

// Tensor: a non-owning, row-major view (shape[ndim-1] is contiguous). Buffer: owning memory.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <string>

#include "core/dtype.h"

namespace lite_llama {

enum class Device : uint8_t { CPU = 0, CUDA = 1 };
inline const char* device_name(Device d) { return d == Device::CPU ? "cpu" : "cuda"; }

struct Tensor {
  void* data = nullptr;
  DType dtype = DType::F32;
  Device device = Device::CPU;
  int ndim = 0;
  int64_t shape[4] = {1, 1, 1, 1};

  Tensor() = default;
  Tensor(void* p, DType t, std::initializer_list<int64_t> dims, Device d = Device::CPU);

  int64_t numel() const;
  int64_t cols() const { return ndim ? shape[ndim - 1] : 1; }
  int64_t rows() const { return cols() ? numel() / cols() : 0; }
  size_t row_nbytes() const { return row_bytes(dtype, cols()); }
  size_t nbytes() const { return size_t(rows()) * row_nbytes(); }
  std::string shape_str() const;

  template <typename T>
  T* ptr() const { return static_cast<T*>(data); }
  // Row r of a 2-D view (any dtype, including block-quantised ones).
  void* row(int64_t r) const { return static_cast<uint8_t*>(data) + size_t(r) * row_nbytes(); }
  // Rows [begin, begin+count) as a new view with the same trailing dims.
  Tensor slice_rows(int64_t begin, int64_t count) const;
};

// Owning device or host memory; freed by the deleter of whoever allocated it.
class Buffer {
 public:
  Buffer() = default;
  Buffer(void* p, size_t bytes, Device d, std::function<void(void*)> deleter)
      : ptr_(p), bytes_(bytes), device_(d), deleter_(std::move(deleter)) {}
  ~Buffer() { reset(); }
  Buffer(Buffer&& o) noexcept { *this = std::move(o); }
  Buffer& operator=(Buffer&& o) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  void reset();
  void* data() const { return ptr_; }
  size_t size() const { return bytes_; }
  Device device() const { return device_; }
  template <typename T>
  T* as() const { return static_cast<T*>(ptr_); }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
  Device device_ = Device::CPU;
  std::function<void(void*)> deleter_;
};

// 64-byte aligned host allocation.
Buffer host_buffer(size_t bytes);

}  // namespace lite_llama

#include "core/tensor.h"

#include <cstdlib>

#include "core/error.h"

namespace lite_llama {

Tensor::Tensor(void* p, DType t, std::initializer_list<int64_t> dims, Device d)
    : data(p), dtype(t), device(d) {
  LL_CHECK(dims.size() >= 1 && dims.size() <= 4, "tensor rank {} not in 1..4", dims.size());
  for (int64_t v : dims) shape[ndim++] = v;
}

int64_t Tensor::numel() const {
  int64_t n = 1;
  for (int i = 0; i < ndim; ++i) n *= shape[i];
  return n;
}

std::string Tensor::shape_str() const {
  std::string s = "[";
  for (int i = 0; i < ndim; ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

Tensor Tensor::slice_rows(int64_t begin, int64_t count) const {
  Tensor t = *this;
  t.data = row(begin);
  // Collapse leading dims into rows.
  int64_t c = cols();
  t.ndim = 2;
  t.shape[0] = count;
  t.shape[1] = c;
  t.shape[2] = t.shape[3] = 1;
  return t;
}

Buffer& Buffer::operator=(Buffer&& o) noexcept {
  if (this != &o) {
    reset();
    ptr_ = o.ptr_;
    bytes_ = o.bytes_;
    device_ = o.device_;
    deleter_ = std::move(o.deleter_);
    o.ptr_ = nullptr;
    o.bytes_ = 0;
  }
  return *this;
}

void Buffer::reset() {
  if (ptr_ && deleter_) deleter_(ptr_);
  ptr_ = nullptr;
  bytes_ = 0;
}

Buffer host_buffer(size_t bytes) {
  size_t rounded = (bytes + 63) / 64 * 64;
  void* p = rounded ? std::aligned_alloc(64, rounded) : nullptr;
  LL_CHECK(rounded == 0 || p != nullptr, "out of host memory allocating {} bytes", bytes);
  return Buffer(p, bytes, Device::CPU, [](void* q) { std::free(q); });
}

}  // namespace lite_llama

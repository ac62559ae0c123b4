#include "core/dtype.h"

#include "core/error.h"
#include "core/gq.h"

namespace lite_llama {
namespace {

struct Entry {
  uint32_t id;
  DTypeInfo info;
};

constexpr Entry kTable[] = {
    {0, {"F32", 1, 4, true}},
    {1, {"F16", 1, 2, true}},
    {2, {"Q4_0", 32, 18, true}},
    {3, {"Q4_1", 32, 20, true}},
    {6, {"Q5_0", 32, 22, true}},
    {7, {"Q5_1", 32, 24, true}},
    {8, {"Q8_0", 32, 34, true}},
    {9, {"Q8_1", 32, 36, false}},
    {10, {"Q2_K", 256, 84, false}},
    {11, {"Q3_K", 256, 110, false}},
    {12, {"Q4_K", 256, 144, true}},
    {13, {"Q5_K", 256, 176, true}},
    {14, {"Q6_K", 256, 210, true}},
    {15, {"Q8_K", 256, 292, false}},
    {24, {"I8", 1, 1, false}},
    {25, {"I16", 1, 2, false}},
    {26, {"I32", 1, 4, true}},
    {27, {"I64", 1, 8, false}},
    {28, {"F64", 1, 8, false}},
    {30, {"BF16", 1, 2, true}},
    {200, {"GQ8", 32, 0, true}},
    {201, {"GQ8_G16", 32, 0, true}},
    {202, {"GQ8_G32", 32, 0, true}},
    {210, {"GQ4_G32", 32, 0, true}},
    {211, {"GQ4_G64", 64, 0, true}},
    {212, {"GQ4_G128", 128, 0, true}},
    {213, {"GQ4", 32, 0, true}},
    {220, {"GF8", 32, 0, true}},
    {221, {"GF8_G128", 128, 0, true}},
    {230, {"F8_E4M3", 1, 1, false}},
};

}  // namespace

const DTypeInfo* dtype_info(uint32_t id) {
  for (const auto& e : kTable)
    if (e.id == id) return &e.info;
  return nullptr;
}

const DTypeInfo& dtype_info(DType t) {
  const DTypeInfo* i = dtype_info(uint32_t(t));
  LL_CHECK(i != nullptr, "unknown dtype id {}", uint32_t(t));
  return *i;
}

size_t row_bytes(DType t, int64_t n) {
  const DTypeInfo& i = dtype_info(t);
  if (auto f = gq_format(t)) {
    LL_CHECK(gq_row_ok(*f, n), "row of {} elements does not fit the {} layout", n, i.name);
    return f->row_bytes(n);
  }
  LL_CHECK(n % i.block_size == 0, "row of {} elements is not a multiple of the {} block size {}", n,
           i.name, i.block_size);
  return size_t(n / i.block_size) * i.block_bytes;
}

}  // namespace lite_llama

// safetensors reader on headers that lie about sizes: each must fail with lite_llama::Error
// naming the tensor, never hand out a view larger than the file.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>

#include "core/error.h"
#include "io/safetensors.h"

using namespace lite_llama;

namespace {

// u64 header length, the JSON header, then `data` bytes.
std::string file_of(const std::string& header, size_t data = 0) {
  const uint64_t n = header.size();
  return std::string(reinterpret_cast<const char*>(&n), 8) + header + std::string(data, '\0');
}

std::unique_ptr<safetensors::Archive> parse(const std::string& f) {
  return safetensors::Archive::parse(reinterpret_cast<const uint8_t*>(f.data()), f.size(), "t.safetensors");
}

std::string parse_error(const std::string& f) {
  try {
    parse(f);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(Safetensors, ValidFileParses) {
  const auto a = parse(file_of(R"({"w": {"dtype": "F16", "shape": [2, 3], "data_offsets": [0, 12]}})", 12));
  const safetensors::TensorEntry* e = a->find("w");
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->view.nbytes(), 12u);
}

// numel * element size wrapped to 0 and matched an empty [0, 0) range: a [2^40, 2^23] tensor in
// a file without data.
TEST(Safetensors, ByteCountThatWrapsIsRejected) {
  for (const char* h : {R"({"w": {"dtype": "F16", "shape": [1099511627776, 8388608], "data_offsets": [0, 0]}})",
                        R"({"w": {"dtype": "F64", "shape": [1099511627776, 2097152], "data_offsets": [0, 0]}})",
                        R"({"w": {"dtype": "I32", "shape": [1099511627776, 1024, 4096], "data_offsets": [0, 0]}})"}) {
    const std::string err = parse_error(file_of(h));
    EXPECT_NE(err.find("'w'"), std::string::npos) << h << ": " << (err.empty() ? "parsed" : err);
    EXPECT_NE(err.find("t.safetensors"), std::string::npos) << err;
  }
}

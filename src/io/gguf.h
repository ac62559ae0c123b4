// GGUF reader (versions 2 and 3): metadata of every value type (nested arrays included),
// tensor infos and the data section, validated against the file size before anything is read.
// Spec: https://github.com/ggml-org/ggml/blob/master/docs/gguf.md
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "core/dtype.h"
#include "core/mmap_file.h"
#include "core/tensor.h"

namespace lite_llama::gguf {

enum class ValueType : uint32_t {
  U8 = 0, I8 = 1, U16 = 2, I16 = 3, U32 = 4, I32 = 5, F32 = 6, BOOL = 7,
  STRING = 8, ARRAY = 9, U64 = 10, I64 = 11, F64 = 12,
};
std::string_view value_type_name(ValueType t);

class Value {
 public:
  using Array = std::vector<Value>;
  ValueType type = ValueType::U8;
  ValueType elem_type = ValueType::U8;  // for arrays
  std::variant<uint64_t, int64_t, double, bool, std::string, Array> v;

  bool is_int() const;
  bool is_number() const { return is_int() || type == ValueType::F32 || type == ValueType::F64; }
  // Accessors convert between numeric kinds where lossless; `key` names the field in errors.
  uint64_t as_u64(std::string_view key) const;
  int64_t as_i64(std::string_view key) const;
  double as_f64(std::string_view key) const;
  bool as_bool(std::string_view key) const;
  const std::string& as_string(std::string_view key) const;
  const Array& as_array(std::string_view key) const;
  // Short human-readable rendering (arrays abbreviated), for `lite-llama info`.
  std::string to_string(size_t max_items = 8) const;
};

struct TensorInfo {
  std::string name;
  std::vector<int64_t> ne;  // ggml order: ne[0] is the contiguous dimension
  DType type;
  uint64_t offset;          // relative to the data section
  size_t nbytes;
  const uint8_t* data;      // inside the mapping
  // Row-major view: shape is ne reversed.
  Tensor view() const;
};

class File {
 public:
  // Maps and parses the file; throws lite_llama::Error naming the problem.
  static std::unique_ptr<File> open(const std::string& path);
  // Parses a buffer that outlives the File (used by the fuzzer and tests).
  static std::unique_ptr<File> parse(const uint8_t* data, size_t size, const std::string& name);

  uint32_t version() const { return version_; }
  const std::string& path() const { return name_; }
  size_t alignment() const { return alignment_; }
  const std::vector<std::pair<std::string, Value>>& metadata() const { return kv_; }
  const Value* find(std::string_view key) const;
  const Value& get(std::string_view key) const;  // throws if missing

  // Typed getters with a default for optional keys.
  uint64_t get_u64(std::string_view key, uint64_t def) const;
  double get_f64(std::string_view key, double def) const;
  bool get_bool(std::string_view key, bool def) const;
  std::string get_string(std::string_view key, const std::string& def) const;

  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const TensorInfo* find_tensor(std::string_view name) const;
  const uint8_t* data_section() const { return data_ + data_offset_; }

 private:
  File() = default;
  void parse_all();

  std::unique_ptr<MmapFile> map_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  std::string name_;
  uint32_t version_ = 0;
  size_t alignment_ = 32;
  size_t data_offset_ = 0;
  std::vector<std::pair<std::string, Value>> kv_;
  std::map<std::string, size_t, std::less<>> kv_index_;
  std::vector<TensorInfo> tensors_;
  std::map<std::string, size_t, std::less<>> tensor_index_;
};

}  // namespace lite_llama::gguf

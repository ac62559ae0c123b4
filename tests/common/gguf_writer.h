// Test-only GGUF writer (versions 2 and 3, little-endian): metadata of every value type, tensors
// and alignment, built in memory. Every field the reader validates can also be forged (header
// counts, string lengths, array counts, type ids, tensor offsets), so the same code builds valid
// fixtures, tiny test models and deliberately broken files.
// Spec: https://github.com/ggml-org/ggml/blob/master/docs/gguf.md
#pragma once
#include <bit>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace lite_llama::testing {

static_assert(std::endian::native == std::endian::little, "the writer emits host-order bytes");

// Value type ids of the spec, kept apart from the reader's enum so that tests check the reader
// against the spec rather than against itself.
// clang-format off
enum class GgufType : uint32_t {
  U8 = 0, I8 = 1, U16 = 2, I16 = 3, U32 = 4, I32 = 5, F32 = 6, BOOL = 7,
  STRING = 8, ARRAY = 9, U64 = 10, I64 = 11, F64 = 12,
};
// clang-format on

// ggml tensor type ids the tests use, with their block geometry.
namespace ggml_type {
constexpr uint32_t F32 = 0, F16 = 1, Q4_0 = 2, Q4_1 = 3, Q8_0 = 8, BF16 = 30;
}

// Bytes of a tensor of `numel` elements (numel a multiple of the block size); throws for types
// the table does not list, so a typo in a test fails loudly instead of writing a wrong size.
inline uint64_t ggml_nbytes(uint32_t type, uint64_t numel) {
  struct Geometry {
    uint32_t type;
    uint64_t block, bytes;
  };
  static constexpr Geometry kTable[] = {
      {ggml_type::F32, 1, 4},    {ggml_type::F16, 1, 2},    {ggml_type::BF16, 1, 2},
      {ggml_type::Q4_0, 32, 18}, {ggml_type::Q4_1, 32, 20}, {ggml_type::Q8_0, 32, 34},
  };
  for (const Geometry& g : kTable) {
    if (g.type != type) continue;
    if (numel % g.block != 0)
      throw std::invalid_argument("ggml_nbytes: numel not a block multiple");
    return numel / g.block * g.bytes;
  }
  throw std::invalid_argument("ggml_nbytes: type not in the test table");
}

namespace detail {
template <typename T>
void put(std::vector<uint8_t>& out, T v) {
  uint8_t b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));
  out.insert(out.end(), b, b + sizeof(T));
}
inline void put_string(std::vector<uint8_t>& out, std::string_view s, std::optional<uint64_t> len) {
  put<uint64_t>(out, len ? *len : s.size());
  out.insert(out.end(), s.begin(), s.end());
}
}  // namespace detail

// One metadata value: a scalar, a string or an array (whose items may be arrays themselves).
class GgufValue {
 public:
  static GgufValue u8(uint8_t x) { return scalar(GgufType::U8, x); }
  static GgufValue i8(int8_t x) { return scalar(GgufType::I8, x); }
  static GgufValue u16(uint16_t x) { return scalar(GgufType::U16, x); }
  static GgufValue i16(int16_t x) { return scalar(GgufType::I16, x); }
  static GgufValue u32(uint32_t x) { return scalar(GgufType::U32, x); }
  static GgufValue i32(int32_t x) { return scalar(GgufType::I32, x); }
  static GgufValue u64(uint64_t x) { return scalar(GgufType::U64, x); }
  static GgufValue i64(int64_t x) { return scalar(GgufType::I64, x); }
  static GgufValue f32(float x) { return scalar(GgufType::F32, x); }
  static GgufValue f64(double x) { return scalar(GgufType::F64, x); }
  static GgufValue boolean(bool x) { return scalar(GgufType::BOOL, uint8_t(x)); }
  static GgufValue str(std::string_view s) {
    GgufValue v(GgufType::STRING);
    v.bytes_.assign(s.begin(), s.end());
    return v;
  }
  // Items must all be of type `elem` (an empty array may name any element type).
  static GgufValue array(GgufType elem, std::vector<GgufValue> items) {
    for (const GgufValue& it : items)
      if (it.type_ != uint32_t(elem)) throw std::invalid_argument("GgufValue::array: mixed types");
    GgufValue v(GgufType::ARRAY);
    v.elem_ = uint32_t(elem);
    v.items_ = std::move(items);
    return v;
  }
  static GgufValue strings(const std::vector<std::string>& xs) {
    std::vector<GgufValue> items;
    for (const std::string& s : xs) items.push_back(str(s));
    return array(GgufType::STRING, std::move(items));
  }
  // Array of a plain C++ type: uint8_t..int64_t, float, double, bool.
  template <typename T>
  static GgufValue array_of(const std::vector<T>& xs) {
    std::vector<GgufValue> items;
    for (const T& x : xs) items.push_back(of(x));
    return array(type_of<T>(), std::move(items));
  }

  // Forging. A type id (known or not) with a payload written verbatim after it.
  static GgufValue raw(uint32_t type_id, std::vector<uint8_t> payload) {
    GgufValue v(GgufType::U8);
    v.type_ = type_id;
    v.bytes_ = std::move(payload);
    v.raw_ = true;
    return v;
  }
  // A string length or array count written instead of the true one.
  GgufValue&& with_count(uint64_t n) && {
    count_ = n;
    return std::move(*this);
  }
  // An array element type written instead of the true one (the items are written unchanged).
  GgufValue&& with_elem_type(uint32_t t) && {
    elem_ = t;
    return std::move(*this);
  }

  uint32_t type_id() const { return type_; }

  // The value as it follows its type id in a key-value pair (or as an array item).
  void write(std::vector<uint8_t>& out) const {
    if (raw_ || (type_ != uint32_t(GgufType::STRING) && type_ != uint32_t(GgufType::ARRAY))) {
      out.insert(out.end(), bytes_.begin(), bytes_.end());
    } else if (type_ == uint32_t(GgufType::STRING)) {
      detail::put_string(
          out, std::string_view(reinterpret_cast<const char*>(bytes_.data()), bytes_.size()),
          count_);
    } else {
      detail::put<uint32_t>(out, elem_);
      detail::put<uint64_t>(out, count_ ? *count_ : items_.size());
      for (const GgufValue& it : items_) it.write(out);
    }
  }

 private:
  explicit GgufValue(GgufType t) : type_(uint32_t(t)) {}
  template <typename T>
  static GgufValue scalar(GgufType t, T x) {
    GgufValue v(t);
    detail::put(v.bytes_, x);
    return v;
  }
  // clang-format off
  template <typename T>
  static constexpr GgufType type_of() {
    if constexpr (std::is_same_v<T, bool>) return GgufType::BOOL;
    else if constexpr (std::is_same_v<T, uint8_t>) return GgufType::U8;
    else if constexpr (std::is_same_v<T, int8_t>) return GgufType::I8;
    else if constexpr (std::is_same_v<T, uint16_t>) return GgufType::U16;
    else if constexpr (std::is_same_v<T, int16_t>) return GgufType::I16;
    else if constexpr (std::is_same_v<T, uint32_t>) return GgufType::U32;
    else if constexpr (std::is_same_v<T, int32_t>) return GgufType::I32;
    else if constexpr (std::is_same_v<T, uint64_t>) return GgufType::U64;
    else if constexpr (std::is_same_v<T, int64_t>) return GgufType::I64;
    else if constexpr (std::is_same_v<T, float>) return GgufType::F32;
    else if constexpr (std::is_same_v<T, double>) return GgufType::F64;
    else static_assert(sizeof(T) == 0, "no GGUF type for this C++ type");
  }
  // clang-format on
  template <typename T>
  static GgufValue of(T x) {
    if constexpr (std::is_same_v<T, bool>) {
      return boolean(x);  // one byte 0/1 whatever sizeof(bool) is
    } else {
      return scalar(type_of<T>(), x);
    }
  }

  uint32_t type_;
  uint32_t elem_ = 0;
  bool raw_ = false;
  std::vector<uint8_t> bytes_;  // scalar payload, string bytes or raw payload
  std::vector<GgufValue> items_;
  std::optional<uint64_t> count_;
};

struct GgufTensor {
  std::string name;
  std::vector<uint64_t> ne;  // ggml order (ne[0] contiguous); written as given, any rank
  uint32_t type = ggml_type::F32;
  std::vector<uint8_t> data;
  std::optional<uint64_t> offset;  // forged offset field; the data still goes to its true place
};

// Header fields written instead of the true ones.
struct GgufHeaderOverride {
  std::optional<std::string> magic;  // written verbatim (any length)
  std::optional<uint32_t> version;
  std::optional<uint64_t> n_tensors, n_kv;
};

class GgufWriter {
 public:
  explicit GgufWriter(uint32_t version = 3) : version_(version) {}

  // Keys are written in the order added; nothing stops duplicates (tests forge those).
  GgufWriter& add(std::string key, GgufValue v) {
    kv_.emplace_back(std::move(key), std::move(v));
    return *this;
  }
  // Writes general.alignment (u32) and lays the data section out with it. Adding the key through
  // add() instead writes it without changing the layout, which is how tests forge bad values.
  GgufWriter& set_alignment(uint32_t a) {
    if (a == 0 || (a & (a - 1)) != 0) throw std::invalid_argument("alignment not a power of two");
    alignment_ = a;
    return add("general.alignment", GgufValue::u32(a));
  }
  GgufWriter& add_tensor(GgufTensor t) {
    tensors_.push_back(std::move(t));
    return *this;
  }
  GgufWriter& add_tensor(std::string name, std::vector<uint64_t> ne, uint32_t type,
                         std::vector<uint8_t> data) {
    return add_tensor(GgufTensor{std::move(name), std::move(ne), type, std::move(data), {}});
  }
  // Zero-filled data of the right size for the type (types of ggml_nbytes only).
  GgufWriter& add_tensor(std::string name, std::vector<uint64_t> ne, uint32_t type) {
    uint64_t numel = 1;
    for (uint64_t n : ne) numel *= n;
    return add_tensor(std::move(name), std::move(ne), type,
                      std::vector<uint8_t>(size_t(ggml_nbytes(type, numel)), 0));
  }
  GgufWriter& add_f32_tensor(std::string name, std::vector<uint64_t> ne,
                             const std::vector<float>& values) {
    std::vector<uint8_t> data(values.size() * sizeof(float));
    std::memcpy(data.data(), values.data(), data.size());
    return add_tensor(std::move(name), std::move(ne), ggml_type::F32, std::move(data));
  }

  GgufHeaderOverride& header() { return header_; }
  // ggml pads after every tensor, the last included; without that tail a file whose last tensor
  // is not a multiple of the alignment ends exactly where its data does.
  GgufWriter& set_pad_tail(bool pad) {
    pad_tail_ = pad;
    return *this;
  }

  size_t alignment() const { return alignment_; }
  // Bytes of the header, metadata and tensor infos before the padding (where a file that is
  // all metadata may end).
  size_t meta_size() const { return meta().size(); }
  // Where the data section starts, and where tensor i starts inside it (the true offsets).
  size_t data_offset() const { return align(meta().size()); }
  uint64_t tensor_offset(size_t i) const {
    uint64_t off = 0;
    for (size_t k = 0; k < i; ++k) off += align(tensors_[k].data.size());
    return off;
  }

  std::vector<uint8_t> bytes() const {
    std::vector<uint8_t> out = meta();
    out.resize(align(out.size()), 0);
    for (size_t i = 0; i < tensors_.size(); ++i) {
      const std::vector<uint8_t>& d = tensors_[i].data;
      out.insert(out.end(), d.begin(), d.end());
      if (pad_tail_ || i + 1 < tensors_.size()) out.resize(align(out.size()), 0);
    }
    return out;
  }

 private:
  size_t align(size_t n) const { return (n + alignment_ - 1) / alignment_ * alignment_; }

  // Header, key-value pairs and tensor infos, unpadded.
  std::vector<uint8_t> meta() const {
    std::vector<uint8_t> out;
    std::string magic = header_.magic.value_or("GGUF");
    out.insert(out.end(), magic.begin(), magic.end());
    detail::put<uint32_t>(out, header_.version.value_or(version_));
    detail::put<uint64_t>(out, header_.n_tensors.value_or(tensors_.size()));
    detail::put<uint64_t>(out, header_.n_kv.value_or(kv_.size()));
    for (const auto& [key, v] : kv_) {
      detail::put_string(out, key, std::nullopt);
      detail::put<uint32_t>(out, v.type_id());
      v.write(out);
    }
    for (size_t i = 0; i < tensors_.size(); ++i) {
      const GgufTensor& t = tensors_[i];
      detail::put_string(out, t.name, std::nullopt);
      detail::put<uint32_t>(out, uint32_t(t.ne.size()));
      for (uint64_t n : t.ne) detail::put<uint64_t>(out, n);
      detail::put<uint32_t>(out, t.type);
      detail::put<uint64_t>(out, t.offset ? *t.offset : tensor_offset(i));
    }
    return out;
  }

  uint32_t version_;
  size_t alignment_ = 32;
  bool pad_tail_ = true;
  GgufHeaderOverride header_;
  std::vector<std::pair<std::string, GgufValue>> kv_;
  std::vector<GgufTensor> tensors_;
};

// Writes bytes to a file (for tests of File::open and for fixtures on disk).
inline void write_file(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
  if (!f) throw std::runtime_error("cannot write " + path);
}

}  // namespace lite_llama::testing

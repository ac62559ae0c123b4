#include "io/gguf.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "core/error.h"

namespace lite_llama::gguf {
namespace {

constexpr uint32_t kMaxDims = 4;
constexpr int kMaxArrayDepth = 8;
constexpr uint64_t kMaxStringBytes = 1ull << 30;
// Cap on array elements in the whole file (real vocabularies hold well under 1M), so that a
// small hostile file cannot make the parsed metadata take gigabytes.
constexpr uint64_t kMaxArrayElements = 8ull << 20;
// Counts in the file are only bounded by its size, and a container entry is several times larger
// than its bytes on disk: reserving a forged count up front could ask for gigabytes (or throw
// bad_alloc) before the first entry fails to parse. Past this, vectors grow with real entries.
constexpr uint64_t kMaxReserve = 1u << 16;

size_t reserve_count(uint64_t n) { return size_t(std::min(n, kMaxReserve)); }

// Bounds-checked little-endian cursor over the file; every read checks what remains.
class Reader {
 public:
  Reader(const uint8_t* p, size_t n, const std::string& name) : p_(p), n_(n), name_(name) {}

  size_t pos() const { return pos_; }
  size_t remaining() const { return n_ - pos_; }

  template <typename T>
  T read(const char* what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, p_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  std::string read_string(const char* what) {
    uint64_t len = read<uint64_t>(what);
    if (len > kMaxStringBytes || len > remaining())
      fail("{}: {} length {} runs past the end of the file (offset {}, {} bytes left)", name_,
           what, len, pos_, remaining());
    std::string s(reinterpret_cast<const char*>(p_ + pos_), size_t(len));
    pos_ += size_t(len);
    return s;
  }
  void need(size_t k, const char* what) const {
    if (k > remaining())
      fail("{}: truncated file: reading {} at offset {} needs {} bytes, {} left", name_, what, pos_,
           k, remaining());
  }
  const std::string& name() const { return name_; }
  void take_elements(uint64_t n, const std::string& key) {
    if (n > kMaxArrayElements - elements_)
      fail("{}: key '{}': absurd array size {} (over {} elements in all)", name_, key, n,
           kMaxArrayElements);
    elements_ += n;
  }

 private:
  uint64_t elements_ = 0;
  const uint8_t* p_;
  size_t n_;
  size_t pos_ = 0;
  const std::string& name_;
};

size_t scalar_size(ValueType t) {
  switch (t) {
    case ValueType::U8: case ValueType::I8: case ValueType::BOOL: return 1;
    case ValueType::U16: case ValueType::I16: return 2;
    case ValueType::U32: case ValueType::I32: case ValueType::F32: return 4;
    case ValueType::U64: case ValueType::I64: case ValueType::F64: return 8;
    case ValueType::STRING: case ValueType::ARRAY: return 8;  // at least the length field
  }
  return 0;
}

bool valid_type(uint32_t t) { return t <= uint32_t(ValueType::F64); }

Value read_value(Reader& r, ValueType t, const std::string& key, int depth) {
  Value v;
  v.type = t;
  switch (t) {
    case ValueType::U8: v.v = uint64_t(r.read<uint8_t>(key.c_str())); break;
    case ValueType::I8: v.v = int64_t(r.read<int8_t>(key.c_str())); break;
    case ValueType::U16: v.v = uint64_t(r.read<uint16_t>(key.c_str())); break;
    case ValueType::I16: v.v = int64_t(r.read<int16_t>(key.c_str())); break;
    case ValueType::U32: v.v = uint64_t(r.read<uint32_t>(key.c_str())); break;
    case ValueType::I32: v.v = int64_t(r.read<int32_t>(key.c_str())); break;
    case ValueType::U64: v.v = r.read<uint64_t>(key.c_str()); break;
    case ValueType::I64: v.v = r.read<int64_t>(key.c_str()); break;
    case ValueType::F32: v.v = double(r.read<float>(key.c_str())); break;
    case ValueType::F64: v.v = r.read<double>(key.c_str()); break;
    case ValueType::BOOL: {
      uint8_t b = r.read<uint8_t>(key.c_str());
      if (b > 1) fail("{}: key '{}': bool value {} is neither 0 nor 1", r.name(), key, b);
      v.v = b != 0;
      break;
    }
    case ValueType::STRING: v.v = r.read_string(key.c_str()); break;
    case ValueType::ARRAY: {
      if (depth >= kMaxArrayDepth)
        fail("{}: key '{}': arrays nested deeper than {}", r.name(), key, kMaxArrayDepth);
      uint32_t et = r.read<uint32_t>(key.c_str());
      if (!valid_type(et)) fail("{}: key '{}': unknown array element type {}", r.name(), key, et);
      uint64_t n = r.read<uint64_t>(key.c_str());
      // Every element takes at least scalar_size bytes, which bounds an absurd count.
      if (n > r.remaining() / scalar_size(ValueType(et)))
        fail("{}: key '{}': array of {} elements cannot fit in the {} bytes left", r.name(), key,
             n, r.remaining());
      r.take_elements(n, key);
      v.elem_type = ValueType(et);
      Value::Array arr;
      arr.reserve(reserve_count(n));
      for (uint64_t i = 0; i < n; ++i) arr.push_back(read_value(r, ValueType(et), key, depth + 1));
      v.v = std::move(arr);
      break;
    }
  }
  return v;
}

}  // namespace

std::string_view value_type_name(ValueType t) {
  static const char* kNames[] = {"u8", "i8", "u16", "i16", "u32", "i32", "f32",
                                 "bool", "string", "array", "u64", "i64", "f64"};
  return uint32_t(t) <= 12 ? kNames[uint32_t(t)] : "unknown";
}

bool Value::is_int() const {
  return std::holds_alternative<uint64_t>(v) || std::holds_alternative<int64_t>(v);
}

uint64_t Value::as_u64(std::string_view key) const {
  if (auto* u = std::get_if<uint64_t>(&v)) return *u;
  if (auto* i = std::get_if<int64_t>(&v)) {
    LL_CHECK(*i >= 0, "metadata '{}' is negative ({}) where a count was expected", key, *i);
    return uint64_t(*i);
  }
  fail("metadata '{}' has type {}, expected an integer", key, value_type_name(type));
}

int64_t Value::as_i64(std::string_view key) const {
  if (auto* i = std::get_if<int64_t>(&v)) return *i;
  if (auto* u = std::get_if<uint64_t>(&v)) {
    LL_CHECK(*u <= uint64_t(std::numeric_limits<int64_t>::max()), "metadata '{}' out of range", key);
    return int64_t(*u);
  }
  fail("metadata '{}' has type {}, expected an integer", key, value_type_name(type));
}

double Value::as_f64(std::string_view key) const {
  if (auto* d = std::get_if<double>(&v)) return *d;
  if (auto* u = std::get_if<uint64_t>(&v)) return double(*u);
  if (auto* i = std::get_if<int64_t>(&v)) return double(*i);
  fail("metadata '{}' has type {}, expected a number", key, value_type_name(type));
}

bool Value::as_bool(std::string_view key) const {
  if (auto* b = std::get_if<bool>(&v)) return *b;
  fail("metadata '{}' has type {}, expected bool", key, value_type_name(type));
}

const std::string& Value::as_string(std::string_view key) const {
  if (auto* s = std::get_if<std::string>(&v)) return *s;
  fail("metadata '{}' has type {}, expected string", key, value_type_name(type));
}

const Value::Array& Value::as_array(std::string_view key) const {
  if (auto* a = std::get_if<Array>(&v)) return *a;
  fail("metadata '{}' has type {}, expected array", key, value_type_name(type));
}

std::string Value::to_string(size_t max_items) const {
  if (auto* u = std::get_if<uint64_t>(&v)) return std::to_string(*u);
  if (auto* i = std::get_if<int64_t>(&v)) return std::to_string(*i);
  if (auto* d = std::get_if<double>(&v)) return fmt::format("{}", *d);
  if (auto* b = std::get_if<bool>(&v)) return *b ? "true" : "false";
  if (auto* s = std::get_if<std::string>(&v)) {
    // Cut at a UTF-8 character boundary, and blank control characters: the text comes from the
    // file and goes to a terminal (`lite-llama info`), where an escape sequence would act.
    size_t cut = s->size();
    if (cut > 80) {
      cut = 77;
      while (cut > 0 && (uint8_t((*s)[cut]) & 0xc0) == 0x80) --cut;
    }
    std::string t = s->substr(0, cut);
    for (char& c : t)
      if (uint8_t(c) < 0x20 || c == 0x7f) c = ' ';
    return "\"" + t + (cut < s->size() ? "...\"" : "\"");
  }
  const Array& a = std::get<Array>(v);
  std::string out = fmt::format("{}[{}] [", value_type_name(elem_type), a.size());
  size_t shown = std::min(a.size(), max_items);
  for (size_t i = 0; i < shown; ++i) out += (i ? ", " : "") + a[i].to_string(0);
  if (a.size() > shown) out += shown ? ", ..." : "...";
  return out + "]";
}

Tensor TensorInfo::view() const {
  Tensor t;
  t.data = const_cast<uint8_t*>(data);
  t.dtype = type;
  t.ndim = int(ne.size());
  for (int i = 0; i < t.ndim; ++i) t.shape[i] = ne[ne.size() - 1 - i];
  return t;
}

std::unique_ptr<File> File::open(const std::string& path) {
  std::unique_ptr<File> f(new File());
  f->map_ = std::make_unique<MmapFile>(path);
  f->data_ = f->map_->data();
  f->size_ = f->map_->size();
  f->name_ = path;
  f->parse_all();
  return f;
}

std::unique_ptr<File> File::parse(const uint8_t* data, size_t size, const std::string& name) {
  std::unique_ptr<File> f(new File());
  f->data_ = data;
  f->size_ = size;
  f->name_ = name;
  f->parse_all();
  return f;
}

void File::parse_all() {
  Reader r(data_, size_, name_);
  if (size_ < 4 || std::memcmp(data_, "GGUF", 4) != 0)
    fail("{}: not a GGUF file (bad magic)", name_);
  r.read<uint32_t>("magic");
  version_ = r.read<uint32_t>("version");
  // v3 allows big-endian files; their version reads byte-swapped here (0x03000000).
  if (version_ > 0xffff && (version_ & 0xffff) == 0)
    fail("{}: big-endian GGUF file (version field {:#010x}) is not supported", name_, version_);
  if (version_ == 1) fail("{}: GGUF version 1 is not supported (re-convert the model)", name_);
  if (version_ != 2 && version_ != 3)
    fail("{}: unsupported GGUF version {} (2 and 3 are)", name_, version_);
  uint64_t n_tensors = r.read<uint64_t>("tensor count");
  uint64_t n_kv = r.read<uint64_t>("metadata count");
  // A key-value pair takes at least 12 bytes, a tensor info at least 24.
  if (n_kv > r.remaining() / 12)
    fail("{}: metadata count {} cannot fit in a file of {} bytes", name_, n_kv, size_);
  if (n_tensors > r.remaining() / 24)
    fail("{}: tensor count {} cannot fit in a file of {} bytes", name_, n_tensors, size_);

  kv_.reserve(reserve_count(n_kv));
  for (uint64_t i = 0; i < n_kv; ++i) {
    std::string key = r.read_string("metadata key");
    uint32_t t = r.read<uint32_t>("metadata type");
    if (!valid_type(t)) fail("{}: key '{}' has unknown value type {}", name_, key, t);
    Value v = read_value(r, ValueType(t), key, 0);
    if (!kv_index_.emplace(key, kv_.size()).second)
      fail("{}: duplicate metadata key '{}'", name_, key);
    kv_.emplace_back(std::move(key), std::move(v));
  }

  if (const Value* a = find("general.alignment")) {
    // Checked here rather than through as_u64 so that every error names the file.
    if (!a->is_int())
      fail("{}: general.alignment has type {}, expected an integer", name_,
           value_type_name(a->type));
    const int64_t* neg = std::get_if<int64_t>(&a->v);
    uint64_t al = neg ? (*neg < 0 ? 0 : uint64_t(*neg)) : std::get<uint64_t>(a->v);
    if (al == 0 || (al & (al - 1)) != 0 || al > (1u << 20))
      fail("{}: general.alignment {} is not a power of two up to 1 MiB", name_, a->to_string());
    alignment_ = size_t(al);
  }

  tensors_.reserve(reserve_count(n_tensors));
  for (uint64_t i = 0; i < n_tensors; ++i) {
    TensorInfo ti;
    ti.name = r.read_string("tensor name");
    uint32_t nd = r.read<uint32_t>("tensor dims");
    if (nd == 0 || nd > kMaxDims)
      fail("{}: tensor '{}' has {} dimensions (1..{} allowed)", name_, ti.name, nd, kMaxDims);
    int64_t numel = 1;
    for (uint32_t d = 0; d < nd; ++d) {
      uint64_t n = r.read<uint64_t>("tensor shape");
      if (n == 0 || n > uint64_t(std::numeric_limits<int64_t>::max()) / uint64_t(numel))
        fail("{}: tensor '{}' dimension {} has invalid size {}", name_, ti.name, d, n);
      numel *= int64_t(n);
      ti.ne.push_back(int64_t(n));
    }
    uint32_t type = r.read<uint32_t>("tensor type");
    const DTypeInfo* info = type < kFirstOwnDType ? dtype_info(type) : nullptr;
    if (!info) fail("{}: tensor '{}' has unknown type id {}", name_, ti.name, type);
    ti.type = DType(type);
    if (ti.ne[0] % info->block_size != 0)
      fail("{}: tensor '{}' row of {} is not a multiple of the {} block size {}", name_, ti.name,
           ti.ne[0], info->name, info->block_size);
    uint64_t blocks = uint64_t(numel) / uint64_t(info->block_size);
    if (blocks > std::numeric_limits<uint64_t>::max() / info->block_bytes)
      fail("{}: tensor '{}' is too large", name_, ti.name);
    ti.nbytes = size_t(blocks * info->block_bytes);
    ti.offset = r.read<uint64_t>("tensor offset");
    if (ti.offset % alignment_ != 0)
      fail("{}: tensor '{}' offset {} is not aligned to {}", name_, ti.name, ti.offset, alignment_);
    if (!tensor_index_.emplace(ti.name, tensors_.size()).second)
      fail("{}: duplicate tensor name '{}'", name_, ti.name);
    tensors_.push_back(std::move(ti));
  }

  data_offset_ = (r.pos() + alignment_ - 1) / alignment_ * alignment_;
  if (data_offset_ > size_) {
    if (n_tensors > 0)
      fail("{}: truncated file: data section starts at {} past the end ({} bytes)", name_,
           data_offset_, size_);
    // A file without tensors may end without padding; keep data_section() inside the buffer.
    data_offset_ = size_;
  }
  size_t data_size = size_ - data_offset_;
  for (TensorInfo& ti : tensors_) {
    if (ti.offset > data_size || ti.nbytes > data_size - ti.offset)
      fail("{}: tensor '{}' data [{}, +{}) lies outside the data section of {} bytes "
           "(truncated file?)",
           name_, ti.name, ti.offset, ti.nbytes, data_size);
    ti.data = data_ + data_offset_ + ti.offset;
  }
}

const Value* File::find(std::string_view key) const {
  auto it = kv_index_.find(key);
  return it == kv_index_.end() ? nullptr : &kv_[it->second].second;
}

const Value& File::get(std::string_view key) const {
  const Value* v = find(key);
  if (!v) fail("{}: missing metadata key '{}'", name_, key);
  return *v;
}

uint64_t File::get_u64(std::string_view key, uint64_t def) const {
  const Value* v = find(key);
  return v ? v->as_u64(key) : def;
}
double File::get_f64(std::string_view key, double def) const {
  const Value* v = find(key);
  return v ? v->as_f64(key) : def;
}
bool File::get_bool(std::string_view key, bool def) const {
  const Value* v = find(key);
  return v ? v->as_bool(key) : def;
}
std::string File::get_string(std::string_view key, const std::string& def) const {
  const Value* v = find(key);
  return v ? v->as_string(key) : def;
}

const TensorInfo* File::find_tensor(std::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

}  // namespace lite_llama::gguf

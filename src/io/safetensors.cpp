#include "io/safetensors.h"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <algorithm>
#include <cstring>
#include <fstream>
#include <limits>
#include <set>
#include <vector>

#include "core/error.h"

namespace fs = std::filesystem;

namespace lite_llama::safetensors {
namespace {

constexpr uint64_t kMaxHeader = 100ull << 20;

DType parse_dtype(const std::string& s, const std::string& file, const std::string& tensor) {
  if (s == "F32") return DType::F32;
  if (s == "F16") return DType::F16;
  if (s == "BF16") return DType::BF16;
  if (s == "I32") return DType::I32;
  if (s == "I8") return DType::I8;
  if (s == "I64") return DType::I64;
  if (s == "F64") return DType::F64;
  if (s == "I16") return DType::I16;
  if (s == "F8_E4M3") return DType::F8_E4M3;
  fail("{}: tensor '{}' has unsupported dtype '{}' (F32, F16, BF16, F8_E4M3 and integer types are)", file,
       tensor, s);
}

}  // namespace

void Archive::add_file(const uint8_t* data, size_t size, const std::string& name) {
  if (size < 8) fail("{}: not a safetensors file (shorter than its 8-byte header size)", name);
  uint64_t hlen = 0;
  std::memcpy(&hlen, data, 8);
  if (hlen > kMaxHeader || hlen > size - 8)
    fail("{}: header size {} runs past the end of the file ({} bytes)", name, hlen, size);
  nlohmann::json h = nlohmann::json::parse(data + 8, data + 8 + hlen, nullptr, false);
  if (h.is_discarded() || !h.is_object()) fail("{}: header is not a JSON object", name);
  const uint8_t* base = data + 8 + hlen;
  const uint64_t avail = size - 8 - hlen;
  std::vector<std::pair<std::pair<uint64_t, uint64_t>, std::string>> ranges;  // for the overlap check
  for (auto it = h.begin(); it != h.end(); ++it) {
    if (it.key() == "__metadata__") continue;
    const std::string& tn = it.key();
    const nlohmann::json& e = it.value();
    if (!e.is_object() || !e.contains("dtype") || !e.contains("shape") || !e.contains("data_offsets") ||
        !e["dtype"].is_string() || !e["shape"].is_array() || !e["data_offsets"].is_array() ||
        e["data_offsets"].size() != 2)
      fail("{}: malformed header entry for tensor '{}'", name, tn);
    DType dt = parse_dtype(e["dtype"].get<std::string>(), name, tn);
    Tensor t;
    t.dtype = dt;
    t.ndim = int(e["shape"].size());
    if (t.ndim > 4) fail("{}: tensor '{}' has {} dimensions (at most 4 supported)", name, tn, t.ndim);
    uint64_t numel = 1;
    for (int d = 0; d < t.ndim; ++d) {
      const auto& v = e["shape"][size_t(d)];
      if (!v.is_number_unsigned()) fail("{}: tensor '{}' has a non-integer dimension", name, tn);
      uint64_t n = v.get<uint64_t>();
      if (n > (1ull << 40) || (n && numel > std::numeric_limits<uint64_t>::max() / n))
        fail("{}: tensor '{}' dimension {} is too large", name, tn, n);
      numel *= n;
      t.shape[d] = int64_t(n);
    }
    if (t.ndim == 0) t.ndim = 1;  // scalar: one element
    const auto& off = e["data_offsets"];
    if (!off[0].is_number_unsigned() || !off[1].is_number_unsigned())
      fail("{}: tensor '{}' has non-integer data_offsets", name, tn);
    uint64_t b = off[0].get<uint64_t>(), en = off[1].get<uint64_t>();
    // The byte count must not wrap: [2^40, 2^23] F16 would "need" 0 bytes and pass as empty.
    const uint64_t elem = dtype_info(dt).block_bytes;
    if (numel > std::numeric_limits<uint64_t>::max() / elem)
      fail("{}: tensor '{}' of {} elements is too large", name, tn, numel);
    const uint64_t want = numel * elem;
    if (b > en || en > avail || en - b != want)
      fail("{}: tensor '{}' data [{}, {}) does not match its shape ({} bytes) or the file size",
           name, tn, b, en, want);
    t.data = const_cast<uint8_t*>(base + b);
    if (!tensors_.emplace(tn, TensorEntry{name, t}).second)
      fail("{}: tensor '{}' appears in more than one file", name, tn);
    if (en > b) ranges.push_back({{b, en}, tn});
  }
  // The format lays tensors out back to back: two sharing bytes is a corrupt (or crafted) file,
  // whose tensors would silently read each other's weights.
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i)
    if (ranges[i].first.first < ranges[i - 1].first.second)
      fail("{}: tensors '{}' and '{}' overlap in the file", name, ranges[i - 1].second, ranges[i].second);
}

std::unique_ptr<Archive> Archive::parse(const uint8_t* data, size_t size, const std::string& name) {
  auto a = std::unique_ptr<Archive>(new Archive());
  a->path_ = name;
  a->add_file(data, size, name);
  return a;
}

std::unique_ptr<Archive> Archive::open_file(const std::string& path) {
  auto a = std::unique_ptr<Archive>(new Archive());
  a->path_ = path;
  a->maps_.push_back(std::make_unique<MmapFile>(path));
  a->add_file(a->maps_.back()->data(), a->maps_.back()->size(), path);
  return a;
}

std::unique_ptr<Archive> Archive::open_dir(const std::string& dir) {
  auto a = std::unique_ptr<Archive>(new Archive());
  a->path_ = dir;
  std::vector<std::string> files;
  const fs::path index = fs::path(dir) / "model.safetensors.index.json";
  if (fs::exists(index)) {
    std::ifstream in(index);
    nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
    if (j.is_discarded() || !j.contains("weight_map") || !j["weight_map"].is_object())
      fail("{}: malformed index (no weight_map object)", index.string());
    std::set<std::string> shards;
    for (auto it = j["weight_map"].begin(); it != j["weight_map"].end(); ++it) {
      if (!it.value().is_string()) fail("{}: weight_map entry '{}' is not a file name", index.string(), it.key());
      const std::string f = it.value().get<std::string>();
      if (f.find('/') != std::string::npos || f.find("..") != std::string::npos)
        fail("{}: shard name '{}' must be a plain file name", index.string(), f);
      shards.insert(f);
    }
    for (const std::string& f : shards) {
      const fs::path p = fs::path(dir) / f;
      if (!fs::exists(p)) fail("{}: shard '{}' listed in the index is missing", dir, f);
      files.push_back(p.string());
    }
  } else {
    for (const auto& e : fs::directory_iterator(dir))
      if (e.path().extension() == ".safetensors") files.push_back(e.path().string());
    std::sort(files.begin(), files.end());
  }
  if (files.empty()) fail("{}: no *.safetensors files", dir);
  for (const std::string& f : files) {
    a->maps_.push_back(std::make_unique<MmapFile>(f));
    a->add_file(a->maps_.back()->data(), a->maps_.back()->size(), f);
  }
  return a;
}

const TensorEntry* Archive::find(const std::string& name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

}  // namespace lite_llama::safetensors

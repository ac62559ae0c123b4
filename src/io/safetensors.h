// safetensors reader (single file or sharded via model.safetensors.index.json), memory-mapped.
// Format: u64 header size, JSON header {name: {dtype, shape, data_offsets}}, then raw data.
#pragma once
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/mmap_file.h"
#include "core/tensor.h"

namespace lite_llama::safetensors {

struct TensorEntry {
  std::string file;  // which shard
  Tensor view;       // row-major, data inside the mapping
};

class Archive {
 public:
  // Opens every *.safetensors of a model directory (the index file decides the set when present).
  static std::unique_ptr<Archive> open_dir(const std::string& dir);
  // Opens one file.
  static std::unique_ptr<Archive> open_file(const std::string& path);
  // Parses a buffer that outlives the archive (tests, fuzzing).
  static std::unique_ptr<Archive> parse(const uint8_t* data, size_t size, const std::string& name);

  const TensorEntry* find(const std::string& name) const;
  const std::map<std::string, TensorEntry>& tensors() const { return tensors_; }
  const std::string& path() const { return path_; }

 private:
  void add_file(const uint8_t* data, size_t size, const std::string& name);

  std::string path_;
  std::vector<std::unique_ptr<MmapFile>> maps_;
  std::map<std::string, TensorEntry> tensors_;
};

}  // namespace lite_llama::safetensors

// Read-only memory map of a whole file (weights stay in the page cache, not copied).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace lite_llama {

class MmapFile {
 public:
  explicit MmapFile(const std::string& path);
  ~MmapFile();
  MmapFile(const MmapFile&) = delete;
  MmapFile& operator=(const MmapFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace lite_llama

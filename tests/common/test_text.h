// Small helpers shared by tests: printable excerpts of strings and id lists for failure
// messages, and a scratch directory removed at the end of a test.
#pragma once
#include <fmt/format.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

namespace lite_llama::testing {

inline std::string escaped(std::string_view s, size_t max = 80) {
  std::string out;
  for (size_t i = 0; i < s.size() && out.size() < max; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else if (c == '\t') out += "\\t";
    else if (c < 0x20 || c == 0x7F) out += fmt::format("\\x{:02x}", c);
    else out += static_cast<char>(c);
  }
  return out;
}

inline std::string ids_str(const std::vector<int32_t>& ids, size_t max = 24) {
  std::string out = "[";
  for (size_t i = 0; i < ids.size() && i < max; ++i) out += (i ? "," : "") + std::to_string(ids[i]);
  return out + (ids.size() > max ? ",...]" : "]");
}

class TempDir {
 public:
  TempDir() {
    static int n = 0;
    path_ = std::filesystem::temp_directory_path() / fmt::format("ll_test_{}_{}", getpid(), n++);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  void write(const std::string& name, const std::string& text) const {
    std::ofstream(path_ / name, std::ios::binary) << text;
  }
  std::string str() const { return path_.string(); }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

}  // namespace lite_llama::testing

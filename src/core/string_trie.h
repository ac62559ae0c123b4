// The longest of a set of strings that starts at a position of a text, found by walking a byte
// trie: the cost is the match's length, not the number of strings (Llama 3 has 256 special
// tokens that all begin with "<|", and testing each at every '<' of a prompt was ~1 us).
#pragma once
#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

namespace lite_llama {

class StringTrie {
 public:
  StringTrie() : nodes_(1) {}

  // value >= 0. Equal strings keep the first value added. Empty strings are ignored.
  void add(std::string_view s, int value) {
    if (s.empty()) return;
    int n = 0;
    for (char c : s) {
      int next = child(n, uint8_t(c));
      if (next < 0) {
        next = int(nodes_.size());
        nodes_[size_t(n)].children.emplace_back(uint8_t(c), next);
        nodes_.emplace_back();
      }
      n = next;
    }
    if (nodes_[size_t(n)].value < 0) nodes_[size_t(n)].value = value;
  }

  // The value of the longest string that text[pos..] starts with, or -1.
  int longest_at(std::string_view text, size_t pos) const {
    int best = -1;
    for (int n = 0; pos < text.size();) {
      n = child(n, uint8_t(text[pos++]));
      if (n < 0) break;
      if (nodes_[size_t(n)].value >= 0) best = nodes_[size_t(n)].value;
    }
    return best;
  }

 private:
  struct Node {
    std::vector<std::pair<uint8_t, int>> children;
    int value = -1;
  };
  int child(int n, uint8_t c) const {
    for (const auto& [b, next] : nodes_[size_t(n)].children)
      if (b == c) return next;
    return -1;
  }
  std::vector<Node> nodes_;
};

}  // namespace lite_llama

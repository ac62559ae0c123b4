// StringTrie::longest_at against testing every string, longest first (first added among equals).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/string_trie.h"

using lite_llama::StringTrie;

TEST(StringTrie, LongestFirstAddedWins) {
  const std::vector<std::string> strs = {"<|a|>", "<|ab|>", "<|a", "<", "<|ab|>", "", "x", "<|abc"};
  StringTrie t;
  for (size_t i = 0; i < strs.size(); ++i) t.add(strs[i], int(i));
  const std::string text = "x<|ab|><|a|><|abc<|a<zz<|ab";
  for (size_t pos = 0; pos <= text.size(); ++pos) {
    int want = -1;
    for (size_t i = 0; i < strs.size(); ++i)
      if (!strs[i].empty() && text.compare(pos, strs[i].size(), strs[i]) == 0 &&
          (want < 0 || strs[i].size() > strs[size_t(want)].size()))
        want = int(i);
    EXPECT_EQ(t.longest_at(text, pos), want) << "at " << pos;
  }
  EXPECT_EQ(StringTrie().longest_at("abc", 0), -1);
}

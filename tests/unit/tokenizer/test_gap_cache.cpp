// GapCache: long texts between special tokens keep their ids across encode() calls. A cached
// gap must give exactly what a fresh tokenizer gives, wherever it appears again.
#include <gtest/gtest.h>

#include <filesystem>

#include "io/gguf.h"
#include "tokenizer/gap_cache.h"
#include "tokenizer/tokenizer.h"

using namespace lite_llama;
namespace fs = std::filesystem;

TEST(GapCache, KeysOnBytesAndFlag) {
  GapCache c;
  const std::string a(300, 'a');
  const int32_t ids[] = {1, 2, 3};
  std::vector<int32_t> out = {9};
  EXPECT_FALSE(c.append(a, false, out));
  c.put(a, false, ids, 3);
  EXPECT_TRUE(c.append(a, false, out));
  EXPECT_EQ(out, (std::vector<int32_t>{9, 1, 2, 3}));
  EXPECT_FALSE(c.append(a, true, out));
  EXPECT_FALSE(c.append(std::string(300, 'b'), false, out));
}

TEST(GapCache, ForgetsTheLeastRecentlyUsed) {
  GapCache c;
  const int32_t id = 7;
  auto text = [](int i) { return std::to_string(i) + std::string(300, 'x'); };
  c.put(text(0), false, &id, 1);
  for (int i = 1; i < 5000; ++i) {
    std::vector<int32_t> out;
    ASSERT_TRUE(c.append(text(0), false, out));  // kept: used all along
    c.put(text(i), false, &id, 1);
  }
  std::vector<int32_t> out;
  EXPECT_FALSE(c.append(text(1), false, out));
  EXPECT_TRUE(c.append(text(4999), false, out));
}

namespace {

// The second prompt repeats the first one's long system text (now not at the start of its
// gap list) and adds turns: one tokenizer that saw the first prompt must agree with a fresh one.
void check_reuse(const Tokenizer& warm, const Tokenizer& fresh) {
  std::string sys;
  for (int i = 0; i < 200; ++i) sys += "word" + std::to_string(i % 37) + (i % 11 ? " " : ".\n");
  const std::string t1 = "<|im_start|>system\n" + sys + "<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n";
  const std::string t2 = t1 + "<|im_start|>assistant\n" + sys + "<|im_end|>\n<|im_start|>user\nmore<|im_end|>\n";
  warm.encode(t1, false, true);
  warm.encode(sys, false, true);  // the same bytes at the start of a text
  EXPECT_EQ(warm.encode(t2, false, true), fresh.encode(t2, false, true));
  EXPECT_EQ(warm.encode(sys, false, true), fresh.encode(sys, false, true));
  EXPECT_EQ(warm.encode(" " + sys, false, true), fresh.encode(" " + sys, false, true));
}

}  // namespace

TEST(GapCache, GgufBpeReuseMatchesFresh) {
  const std::string path = std::string(LL_SOURCE_DIR) + "/models/SmolLM2-135M-Instruct.Q4_1.gguf";
  if (!fs::exists(path)) GTEST_SKIP() << path << " is absent; run scripts/fetch-model";
  auto f = gguf::File::open(path);
  check_reuse(*Tokenizer::from_gguf(*f), *Tokenizer::from_gguf(*f));
}

// Byte-level and SentencePiece (a prefix space only at a text's origin) families.
TEST(GapCache, HfTokenizerReuseMatchesFresh) {
  for (const char* name : {"smollm2", "llama3.2", "llama2"}) {
    const std::string dir = std::string(LL_SOURCE_DIR) + "/tests/fixtures/hf_tokenizers/" + name;
    if (!fs::exists(dir + "/tokenizer.json")) continue;
    SCOPED_TRACE(name);
    check_reuse(*Tokenizer::from_hf_dir(dir), *Tokenizer::from_hf_dir(dir));
  }
}

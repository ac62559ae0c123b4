// vLLM's bad_words (vllm/sampling_params.py update_from_tokenizer, v1/sample/ops/bad_words.py):
// how words become token sequences, which token a step bans; allowed_token_ids' validation.
#include <gtest/gtest.h>

#include <map>
#include <stdexcept>

#include "lite_llama/sampling_params.h"
#include "sampling/bad_words.h"

using namespace lite_llama;
using Ids = std::vector<int32_t>;

namespace {

// A word-level vocabulary where " cat" is one token of its own and " big dog" two.
Ids encode(const std::string& s) {
  static const std::map<std::string, Ids> v = {
      {"cat", {10}}, {" cat", {11}}, {"big dog", {20, 21}}, {" big dog", {22, 21}},
      {"a b", {30, 31}}, {" a b", {32, 30, 31}}, {"x", {40}}, {" x", {40}}};
  return v.at(s);
}

std::vector<int32_t> banned(const std::vector<Ids>& words, const Ids& out) {
  std::vector<int32_t> b;
  sampling::banned_tokens(words, out.data(), out.size(), [&](int32_t t) { b.push_back(t); });
  return b;
}

}  // namespace

TEST(BadWords, TokenizedPlainAndWithALeadingSpaceAsVllm) {
  // Left-stripped first; the spaced form is kept only where its first token differs and its
  // length is the same (" a b" is longer: dropped; " x" starts alike: dropped).
  EXPECT_EQ(sampling::tokenize_bad_words({"  cat"}, encode), (std::vector<Ids>{{10}, {11}}));
  EXPECT_EQ(sampling::tokenize_bad_words({"big dog"}, encode), (std::vector<Ids>{{20, 21}, {22, 21}}));
  EXPECT_EQ(sampling::tokenize_bad_words({"a b"}, encode), (std::vector<Ids>{{30, 31}}));
  EXPECT_EQ(sampling::tokenize_bad_words({"x"}, encode), (std::vector<Ids>{{40}}));
}

TEST(BadWords, LastTokenBannedWhereThePrefixEndsTheOutput) {
  const std::vector<Ids> words = {{10}, {20, 21}, {5, 6, 7}};
  EXPECT_EQ(banned(words, {}), Ids{10});  // a one-token word: always, from the first token on
  EXPECT_EQ(banned(words, {1, 20}), (Ids{10, 21}));
  EXPECT_EQ(banned(words, {20, 1}), Ids{10});  // the prefix must end the output
  EXPECT_EQ(banned(words, {6}), Ids{10});     // a partial prefix is no match
  EXPECT_EQ(banned(words, {9, 5, 6}), (Ids{10, 7}));
}

TEST(SamplingParams, AllowedTokenIdsAndBadWordsValidated) {
  auto rejected = [](const SamplingParams& p, const std::string& name) {
    try {
      p.validate();
      ADD_FAILURE() << "accepted bad " << name;
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find(name), std::string::npos) << e.what();
    }
  };
  SamplingParams p;
  p.allowed_token_ids = Ids{};
  rejected(p, "allowed_token_ids");
  p.allowed_token_ids = Ids{3, -1};
  rejected(p, "allowed_token_ids");
  p.allowed_token_ids = Ids{3};
  EXPECT_NO_THROW(p.validate());
  p.bad_words = {"ok", " \t"};
  rejected(p, "bad_words");
  p.bad_words.assign(129, "w");
  rejected(p, "bad_words");
  p.bad_words.assign(128, "w");
  EXPECT_NO_THROW(p.validate());
}

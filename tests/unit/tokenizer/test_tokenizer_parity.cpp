// Parity with HF `tokenizers` on the fixture corpus (scripts/fixtures/make_tokenizer_fixtures.py):
// the default model's GGUF vocabulary under the smollm, llama-bpe and qwen2 pre-tokenizers must
// reproduce every reference id, with and without special-token parsing; decode must invert
// encode; the streaming detokenizer must agree with decode.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <array>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/test_text.h"
#include "io/gguf.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"

using namespace lite_llama;
using lite_llama::testing::escaped;
using lite_llama::testing::ids_str;
using json = nlohmann::json;

namespace {

std::string model_path() {
  return std::string(LL_SOURCE_DIR) + "/models/SmolLM2-135M-Instruct.Q4_1.gguf";
}
std::string fixture_dir() { return std::string(LL_SOURCE_DIR) + "/tests/fixtures/tokenizer"; }

json read_json(const std::string& path) {
  std::ifstream f(path);
  if (!f) throw std::runtime_error("cannot open " + path);
  return json::parse(f);
}

struct Fixture {
  std::unique_ptr<gguf::File> file;
  std::vector<std::string> corpus;
};

// Loaded once for all tests: the model file and the corpus.
const Fixture* fixture() {
  static const Fixture* fx = [] {
    if (!std::filesystem::exists(model_path())) return static_cast<Fixture*>(nullptr);
    auto* f = new Fixture;
    f->file = gguf::File::open(model_path());
    f->corpus = read_json(fixture_dir() + "/corpus.json").at("strings").get<std::vector<std::string>>();
    return f;
  }();
  return fx;
}

#define REQUIRE_MODEL()                                                                     \
  const Fixture* fx = fixture();                                                            \
  if (!fx) GTEST_SKIP() << "model file " << model_path() << " is absent (git-ignored); "   \
                        << "run scripts/fetch-model to get it"

class TokenizerParity : public ::testing::TestWithParam<std::string> {};

TEST_P(TokenizerParity, MatchesHfIdsOnCorpus) {
  REQUIRE_MODEL();
  const std::string pre = GetParam();
  auto tok = Tokenizer::from_gguf(*fx->file, TokenizerOptions{pre});
  const json ref = read_json(fixture_dir() + "/ids_" + pre + ".json");
  const auto& special = ref.at("ids_parse_special");
  const auto& plain_diff = ref.at("ids_plain_where_different");
  ASSERT_EQ(special.size(), fx->corpus.size()) << "fixtures out of date: regenerate them";

  size_t n_bad = 0, n_tokens = 0;
  for (size_t i = 0; i < fx->corpus.size(); ++i) {
    const std::string& s = fx->corpus[i];
    const auto want = special[i].get<std::vector<int32_t>>();
    const auto got = tok->encode(s, false, true);
    n_tokens += got.size();
    if (got != want && ++n_bad <= 8) {
      ADD_FAILURE() << pre << " parse_special #" << i << " \"" << escaped(s) << "\"\n  want "
                    << ids_str(want) << "\n  got  " << ids_str(got);
    }
    const auto it = plain_diff.find(std::to_string(i));
    const auto want_plain = it == plain_diff.end() ? want : it->get<std::vector<int32_t>>();
    const auto got_plain = tok->encode(s, false, false);
    if (got_plain != want_plain && ++n_bad <= 8) {
      ADD_FAILURE() << pre << " plain #" << i << " \"" << escaped(s) << "\"\n  want "
                    << ids_str(want_plain) << "\n  got  " << ids_str(got_plain);
    }
  }
  EXPECT_EQ(n_bad, 0u) << "of " << fx->corpus.size() << " strings (" << pre << ")";
  EXPECT_EQ(n_tokens, ref.at("n_tokens").get<size_t>());
}

// The regexes alone, against HF's pre_tokenize_str: needs only the fixtures, not the model.
TEST_P(TokenizerParity, PiecesMatchHfPreTokenizer) {
  const std::string pre = GetParam();
  const auto corpus = read_json(fixture_dir() + "/corpus.json").at("strings");
  const json ref = read_json(fixture_dir() + "/ids_" + pre + ".json");
  const auto& want_all = ref.at("piece_bytes");
  ASSERT_EQ(want_all.size(), corpus.size()) << "fixtures out of date: regenerate them";
  auto pt = PreTokenizer::create(pre);
  std::vector<std::string_view> pieces;
  size_t n_bad = 0;
  for (size_t i = 0; i < corpus.size(); ++i) {
    const auto s = corpus[i].get<std::string>();
    pieces.clear();
    pt->split(s, pieces);
    std::vector<int32_t> got;
    for (auto p : pieces) got.push_back(static_cast<int32_t>(p.size()));
    const auto want = want_all[i].get<std::vector<int32_t>>();
    if (got != want && ++n_bad <= 8) {
      ADD_FAILURE() << pre << " pieces #" << i << " \"" << escaped(s) << "\"\n  want lengths "
                    << ids_str(want) << "\n  got          " << ids_str(got);
    }
  }
  EXPECT_EQ(n_bad, 0u) << "of " << corpus.size() << " strings (" << pre << ")";
}

INSTANTIATE_TEST_SUITE_P(Pre, TokenizerParity, ::testing::Values("smollm", "llama-bpe", "qwen2"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& c : n) if (c == '-') c = '_';
                           return n;
                         });

TEST(TokenizerRoundTrip, DecodeInvertsEncode) {
  REQUIRE_MODEL();
  auto tok = Tokenizer::from_gguf(*fx->file);
  // The vocabulary lacks a few byte symbols (0x04, 0x1D, 0xC0, 0xFF, ...); like HF, encode
  // drops those bytes, so they are the only ones allowed to go missing.
  std::array<bool, 256> droppable{};
  for (int b = 0; b < 256; ++b) droppable[b] = tok->token_id(unicode::byte_to_symbol()[b]) < 0;
  size_t n_bad = 0;
  for (const std::string& s : fx->corpus) {
    std::string want;
    for (char c : s) if (!droppable[static_cast<uint8_t>(c)]) want += c;
    for (bool parse_special : {false, true}) {
      const std::string got = tok->decode(tok->encode(s, false, parse_special));
      if (got != want && ++n_bad <= 5) ADD_FAILURE() << "\"" << escaped(s) << "\" -> \"" << escaped(got) << "\"";
    }
  }
  EXPECT_EQ(n_bad, 0u);
}

TEST(TokenizerStreaming, PushesAreWholeCharactersAndMatchDecode) {
  REQUIRE_MODEL();
  auto tok = Tokenizer::from_gguf(*fx->file);
  // Emoji and CJK come out as several byte-level tokens each; none may surface half-done.
  std::vector<std::string> texts = {"👨‍👩‍👧‍👦 family 👍🏽 ok 🇺🇸", "東京は日本の首都です。", "中文English混合",
                                    "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𐍈 \U0010FFFF", "<|im_start|>user\n😀<|im_end|>"};
  for (const auto& s : fx->corpus) texts.push_back(s);
  size_t n_multi = 0;
  for (const std::string& s : texts) {
    const auto ids = tok->encode(s, false, true);
    StreamingDetokenizer d(*tok, /*skip_special=*/false);
    std::string all;
    for (int32_t id : ids) {
      const std::string out = d.push(id);
      ASSERT_TRUE(unicode::is_valid_utf8(out)) << "\"" << escaped(s) << "\" token " << id;
      if (out.empty()) ++n_multi;
      all += out;
    }
    all += d.flush();
    EXPECT_EQ(all, unicode::sanitize_utf8(tok->decode(ids))) << "\"" << escaped(s) << "\"";
  }
  EXPECT_GT(n_multi, 0u) << "the corpus should split some characters across tokens";

  // skip_special drops control tokens, as decode(skip_special) does.
  const auto ids = tok->encode("<|im_start|>user\nhi<|im_end|>", false, true);
  StreamingDetokenizer d(*tok);
  std::string all;
  for (int32_t id : ids) all += d.push(id);
  all += d.flush();
  EXPECT_EQ(all, "user\nhi");
  EXPECT_EQ(all, tok->decode(ids, true));
}

TEST(TokenizerGguf, DefaultModelMetadata) {
  REQUIRE_MODEL();
  auto tok = Tokenizer::from_gguf(*fx->file);
  EXPECT_EQ(tok->vocab_size(), 49152);
  EXPECT_EQ(tok->bos_id(), 1);
  EXPECT_EQ(tok->eos_id(), 2);
  EXPECT_EQ(tok->eot_id(), -1);
  EXPECT_EQ(tok->pad_id(), 2);
  EXPECT_EQ(tok->unk_id(), 0);  // tokenizer.ggml.unknown_token_id
  EXPECT_FALSE(tok->add_bos());
  EXPECT_EQ(tok->stop_ids(), std::vector<int32_t>{2});
  EXPECT_TRUE(tok->is_special(1));
  EXPECT_EQ(tok->token_text(1), "<|im_start|>");
  EXPECT_EQ(tok->encode("hi", true, true), tok->encode("hi", false, true));  // add_bos is off
}

TEST(TokenizerSpeed, EncodeCorpus) {
  REQUIRE_MODEL();
  auto tok = Tokenizer::from_gguf(*fx->file);
  size_t n_tokens = 0, n_bytes = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (int rep = 0; rep < 3; ++rep) {
    for (const std::string& s : fx->corpus) {
      n_tokens += tok->encode(s, false, true).size();
      n_bytes += s.size();
    }
  }
  const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double tps = n_tokens / sec;
  std::printf("[ speed    ] smollm encode: %.2f M tokens/s, %.1f MB/s (%zu tokens in %.3f s)\n",
              tps / 1e6, n_bytes / sec / 1e6, n_tokens, sec);
  RecordProperty("tokens_per_s", static_cast<int>(tps));
  EXPECT_GT(tps, 1e5);  // a floor that only catches pathological slowness
}

}  // namespace

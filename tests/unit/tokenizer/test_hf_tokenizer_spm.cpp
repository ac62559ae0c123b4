// Tokenizer::from_hf_dir on hand-made tokenizer.json files: SentencePiece-style BPE ("▁" spaces,
// <0xXX> byte fallback, fused unknowns) in both layouts HF writes (the legacy normalizer
// Prepend + Replace, and the Metaspace pre-tokenizer), added-token flags, and the errors of
// broken directories. Expected ids were checked against HF `tokenizers` 0.23.
#include <gtest/gtest.h>
#include <fmt/format.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>

#include "common/test_text.h"
#include "core/error.h"
#include "tokenizer/hf_pretokenizer.h"
#include "tokenizer/tokenizer.h"

using namespace lite_llama;
using lite_llama::testing::TempDir;
using lite_llama::testing::escaped;
using lite_llama::testing::ids_str;
using json = nlohmann::json;
namespace fs = std::filesystem;
using Ids = std::vector<int32_t>;

namespace {


// <unk> <s> </s>, the 256 byte tokens (ids 3..258), then ▁=259 a=260 b=261 ▁a=262 ab=263
// ▁ab=264 é=265 c=266; merges "▁ a", "a b", "▁a b". The layout of Llama 2's tokenizer.json.
json spm_tokenizer() {
  json vocab = json::object();
  vocab["<unk>"] = 0;
  vocab["<s>"] = 1;
  vocab["</s>"] = 2;
  for (int b = 0; b < 256; ++b) vocab[fmt::format("<0x{:02X}>", b)] = 3 + b;
  int next = 259;
  for (const char* t : {"▁", "a", "b", "▁a", "ab", "▁ab", "é", "c"}) vocab[t] = next++;
  json added = json::array();
  for (int i = 0; i < 3; ++i) {
    added.push_back({{"id", i}, {"content", i == 0 ? "<unk>" : i == 1 ? "<s>" : "</s>"},
                     {"single_word", false}, {"lstrip", false}, {"rstrip", false},
                     {"normalized", false}, {"special", true}});
  }
  return {
      {"version", "1.0"},
      {"added_tokens", added},
      {"normalizer",
       {{"type", "Sequence"},
        {"normalizers",
         {{{"type", "Prepend"}, {"prepend", "▁"}},
          {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "▁"}}}}}},
      {"pre_tokenizer", nullptr},
      {"post_processor",
       {{"type", "TemplateProcessing"},
        {"single", {{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}},
                    {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
        {"pair", json::array()},
        {"special_tokens", {{"<s>", {{"id", "<s>"}, {"ids", {1}}, {"tokens", {"<s>"}}}}}}}},
      {"decoder",
       {{"type", "Sequence"},
        {"decoders",
         {{{"type", "Replace"}, {"pattern", {{"String", "▁"}}}, {"content", " "}},
          {{"type", "ByteFallback"}},
          {{"type", "Fuse"}},
          {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}}}}},
      {"model",
       {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", "<unk>"}, {"fuse_unk", true},
        {"byte_fallback", true}, {"vocab", vocab}, {"merges", {"▁ a", "a b", "▁a b"}}}},
  };
}

json metaspace_tokenizer() {
  json j = spm_tokenizer();
  j["normalizer"] = nullptr;
  j["pre_tokenizer"] = {{"type", "Metaspace"}, {"replacement", "▁"},
                        {"prepend_scheme", "first"}, {"split", false}};
  return j;
}

std::unique_ptr<Tokenizer> load(const json& tokenizer, const json& config = nullptr) {
  TempDir d;
  d.write("tokenizer.json", tokenizer.dump());
  if (!config.is_null()) d.write("tokenizer_config.json", config.dump());
  return Tokenizer::from_hf_dir(d.str());
}

TEST(HfSentencePiece, LegacyNormalizerPrependsAndReplacesSpaces) {
  auto tok = load(spm_tokenizer());
  EXPECT_EQ(tok->encode("ab", true, true), (Ids{1, 264}));
  // Prepend is unconditional: a leading space gives "▁▁ab".
  EXPECT_EQ(tok->encode(" ab", true, true), (Ids{1, 259, 264}));
  EXPECT_EQ(tok->encode("a b", true, true), (Ids{1, 262, 259, 261}));
  EXPECT_EQ(tok->encode(" ", true, true), (Ids{1, 259, 259}));
  EXPECT_EQ(tok->encode("", true, true), (Ids{1}));
  // The text after an added token is normalised on its own, so it gets its own "▁".
  EXPECT_EQ(tok->encode("<s>ab", true, true), (Ids{1, 1, 264}));
  EXPECT_EQ(tok->encode("ab<s> ab", true, true), (Ids{1, 264, 1, 259, 264}));
}

TEST(HfSentencePiece, MetaspaceFirstPrependsOnlyAtTheStart) {
  auto tok = load(metaspace_tokenizer());
  EXPECT_EQ(tok->encode("ab", true, true), (Ids{1, 264}));
  // The text already starts with "▁" (the space): nothing is prepended.
  EXPECT_EQ(tok->encode(" ab", true, true), (Ids{1, 264}));
  EXPECT_EQ(tok->encode(" ", true, true), (Ids{1, 259}));
  EXPECT_EQ(tok->encode("<s>ab", true, true), (Ids{1, 1, 263}));
  EXPECT_EQ(tok->encode("ab<s> ab", true, true), (Ids{1, 264, 1, 264}));
}

TEST(HfSentencePiece, ByteFallbackEncodesMissingCharactersAsBytes) {
  auto tok = load(spm_tokenizer());
  // "€" is E2 82 AC: <0xE2>=229 <0x82>=133 <0xAC>=175.
  EXPECT_EQ(tok->encode("€", true, true), (Ids{1, 259, 229, 133, 175}));
  EXPECT_EQ(tok->encode("a€é", true, true), (Ids{1, 262, 229, 133, 175, 265}));
  EXPECT_EQ(tok->encode(std::string("a\0", 2), true, true), (Ids{1, 262, 3}));
  // Invalid UTF-8 (HF never sees it) still round-trips through the byte tokens.
  EXPECT_EQ(tok->encode("a\xff", false, true), (Ids{262, 3 + 0xFF}));
  EXPECT_EQ(tok->decode({262, 3 + 0xFF}, true), "a\xff");
  EXPECT_EQ(tok->token_bytes(3 + 0xE2), "\xE2");
}

TEST(HfSentencePiece, UnknownsAreFusedWithoutByteFallback) {
  json j = spm_tokenizer();
  j["model"]["byte_fallback"] = false;
  auto tok = load(j);
  EXPECT_EQ(tok->encode("€", true, true), (Ids{1, 259, 0}));
  EXPECT_EQ(tok->encode("€€c", true, true), (Ids{1, 259, 0, 266}));
  EXPECT_EQ(tok->encode("a€é", true, true), (Ids{1, 262, 0, 265}));
  j["model"]["fuse_unk"] = false;
  EXPECT_EQ(load(j)->encode("€€c", true, true), (Ids{1, 259, 0, 0, 266}));
}

TEST(HfSentencePiece, DecodeTurnsMetaspaceBackIntoSpaces) {
  auto tok = load(spm_tokenizer());
  EXPECT_EQ(tok->decode({1, 264}, false), "<s> ab");
  EXPECT_EQ(tok->decode({1, 264}, true), "ab");  // Strip drops the first "▁"'s space
  EXPECT_EQ(tok->decode({1, 259, 264}, true), " ab");
  EXPECT_EQ(tok->decode({1, 262, 229, 133, 175, 265}, true), "a€é");
  EXPECT_EQ(tok->decode({1, 264, 1, 259, 264}, true), "ab  ab");
  // One token at a time (streaming) keeps the leading space.
  EXPECT_EQ(tok->token_bytes(264), " ab");
  StreamingDetokenizer d(*tok);
  std::string s;
  for (int32_t id : Ids{1, 262, 229, 133, 175}) s += d.push(id);
  EXPECT_EQ(s + d.flush(), " a€");
}

TEST(HfSentencePiece, ConfigFlagsOverrideTheTemplate) {
  // transformers rebuilds the template from add_bos_token / add_eos_token when either is set.
  json cfg = {{"bos_token", {{"content", "<s>"}, {"__type", "AddedToken"}}}, {"eos_token", "</s>"},
              {"add_bos_token", false}, {"add_eos_token", true},
              {"chat_template", {{{"name", "tool_use"}, {"template", "T"}},
                                 {{"name", "default"}, {"template", "D"}}}}};
  auto tok = load(spm_tokenizer(), cfg);
  EXPECT_EQ(tok->encode("ab", true, true), (Ids{264, 2}));
  EXPECT_FALSE(tok->add_bos());
  EXPECT_EQ(tok->bos_id(), 1);
  EXPECT_EQ(tok->eos_token(), "</s>");
  EXPECT_EQ(tok->chat_template(), "D");
  EXPECT_EQ(tok->stop_ids(), (Ids{2}));
}

TEST(HfAddedTokens, FlagsControlMatching) {
  json j = metaspace_tokenizer();
  auto add = [&](int id, const char* text, bool special, bool lstrip, bool rstrip) {
    j["added_tokens"].push_back({{"id", id}, {"content", text}, {"single_word", false},
                                 {"lstrip", lstrip}, {"rstrip", rstrip}, {"normalized", false},
                                 {"special", special}});
  };
  add(267, "<L>", true, true, false);
  add(268, "<R>", true, false, true);
  add(269, "<U>", false, false, false);
  auto tok = load(j);
  EXPECT_EQ(tok->vocab_size(), 270);
  // lstrip swallows the spaces before the token, rstrip those after it.
  EXPECT_EQ(tok->encode("ab  <L>ab", false, true), (Ids{264, 267, 263}));
  EXPECT_EQ(tok->encode("ab<R>  ab", false, true), (Ids{264, 268, 263}));
  // Unparsed specials are plain text; non-special added tokens always match.
  EXPECT_EQ(tok->encode("<U>", false, false), (Ids{269}));
  EXPECT_NE(tok->encode("<L>", false, false), (Ids{267}));
  EXPECT_TRUE(tok->is_control(267));
  EXPECT_FALSE(tok->is_control(269));
  EXPECT_EQ(tok->decode({264, 267, 269}, true), "ab<U>");
}

std::vector<std::string> pre_split(const json& j, std::string_view text) {
  auto pre = HfPreTokenizer::from_json(j, "test");
  std::vector<PrePiece> pieces;
  std::deque<std::string> arena;
  pre->split(text, true, pieces, arena);
  std::vector<std::string> out;
  for (const PrePiece& p : pieces) out.emplace_back(p.text);
  return out;
}

TEST(HfPreTokenizer, SplitBehaviorsMatchHf) {
  using V = std::vector<std::string>;
  auto split = [](const char* behavior, bool invert = false) {
    return json{{"type", "Split"}, {"pattern", {{"Regex", "\\d"}}}, {"behavior", behavior},
                {"invert", invert}};
  };
  EXPECT_EQ(pre_split(split("Isolated"), "a12b3"), (V{"a", "1", "2", "b", "3"}));
  EXPECT_EQ(pre_split(split("Removed"), "a12b3"), (V{"a", "b"}));
  EXPECT_EQ(pre_split(split("MergedWithPrevious"), "a12b3"), (V{"a1", "2", "b3"}));
  EXPECT_EQ(pre_split(split("MergedWithNext"), "a12b3"), (V{"a", "1", "2b", "3"}));
  EXPECT_EQ(pre_split(split("Contiguous"), "a12b3"), (V{"a", "12", "b", "3"}));
  EXPECT_EQ(pre_split(split("Removed", true), "a12b3"), (V{"1", "2", "3"}));
  const json literal = {{"type", "Split"}, {"pattern", {{"String", " "}}}, {"behavior", "Removed"}};
  EXPECT_EQ(pre_split(literal, "a  b"), (V{"a", "b"}));
  EXPECT_EQ(pre_split({{"type", "Digits"}, {"individual_digits", false}}, "a12b3"),
            (V{"a", "12", "b", "3"}));
  // ByteLevel's prefix space goes on every piece of the previous step (bytes stay raw here).
  const json bl = {{"type", "Sequence"},
                   {"pretokenizers",
                    {split("Isolated"),
                     {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"use_regex", false}}}}};
  EXPECT_EQ(pre_split(bl, "ab1cd 2"), (V{" ab", " 1", " cd ", " 2"}));
  const json ms = {{"type", "Metaspace"}, {"replacement", "▁"}, {"prepend_scheme", "always"},
                   {"split", true}};
  EXPECT_EQ(pre_split(ms, " hello  world"), (V{"▁hello", "▁", "▁world"}));
}

// ----------------------------------------------------------------------------------------------
// Errors
// ----------------------------------------------------------------------------------------------

std::string load_error(const std::function<void(TempDir&)>& setup) {
  TempDir d;
  setup(d);
  try {
    Tokenizer::from_hf_dir(d.str());
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

bool mentions(const std::string& msg, std::initializer_list<const char*> parts) {
  for (const char* p : parts)
    if (msg.find(p) == std::string::npos) return false;
  return true;
}

TEST(HfTokenizerErrors, MissingDirectoryOrFile) {
  EXPECT_THROW(Tokenizer::from_hf_dir("/nonexistent/lite-llama/dir"), Error);
  const std::string msg = load_error([](TempDir& d) { d.write("tokenizer_config.json", "{}"); });
  EXPECT_TRUE(mentions(msg, {"tokenizer.json", "missing"})) << msg;
}

TEST(HfTokenizerErrors, MalformedJson) {
  std::string msg = load_error([](TempDir& d) { d.write("tokenizer.json", "{\"model\": [1, 2"); });
  EXPECT_TRUE(mentions(msg, {"tokenizer.json", "malformed JSON"})) << msg;
  msg = load_error([](TempDir& d) {
    d.write("tokenizer.json", spm_tokenizer().dump());
    d.write("tokenizer_config.json", "{\"bos_token\": ");
  });
  EXPECT_TRUE(mentions(msg, {"tokenizer_config.json", "malformed JSON"})) << msg;
}

TEST(HfTokenizerErrors, UnsupportedParts) {
  struct Case {
    const char* field;
    json value;
    std::initializer_list<const char*> expect;
  };
  const Case cases[] = {
      {"model", {{"type", "WordPiece"}, {"vocab", {{"a", 0}}}}, {"model.type", "WordPiece"}},
      {"model", {{"type", "Unigram"}, {"vocab", json::array()}}, {"model.type", "Unigram"}},
      {"pre_tokenizer", {{"type", "Whitespace"}}, {"pre_tokenizer.type", "Whitespace"}},
      {"pre_tokenizer",
       {{"type", "Sequence"}, {"pretokenizers", {{{"type", "Digits"}}, {{"type", "Bert"}}}}},
       {"pre_tokenizer.pretokenizers[1].type", "Bert"}},
      {"normalizer", {{"type", "Precompiled"}}, {"normalizer.type", "Precompiled"}},
      {"decoder", {{"type", "WordPiece"}}, {"decoder.type", "WordPiece"}},
      {"post_processor", {{"type", "Unknown"}}, {"post_processor.type", "Unknown"}},
  };
  for (const Case& c : cases) {
    const std::string msg = load_error([&](TempDir& d) {
      json j = spm_tokenizer();
      j[c.field] = c.value;
      d.write("tokenizer.json", j.dump());
    });
    EXPECT_TRUE(mentions(msg, c.expect)) << c.field << ": " << msg;
    EXPECT_TRUE(mentions(msg, {"tokenizer.json"})) << msg;
  }
}

TEST(HfTokenizerErrors, BrokenModelFields) {
  auto with = [](auto edit) {
    return load_error([&](TempDir& d) {
      json j = spm_tokenizer();
      edit(j);
      d.write("tokenizer.json", j.dump());
    });
  };
  std::string msg = with([](json& j) { j["model"]["merges"] = {"a zz"}; });
  EXPECT_TRUE(mentions(msg, {"model.merges[0]", "zz"})) << msg;
  msg = with([](json& j) { j["model"]["merges"] = {"a b", json::array({"a", "b"})}; });
  EXPECT_TRUE(mentions(msg, {"model.merges[1]"})) << msg;
  msg = with([](json& j) { j["model"]["vocab"]["x"] = "seven"; });
  EXPECT_TRUE(mentions(msg, {"model.vocab", "'x'"})) << msg;
  msg = with([](json& j) { j["model"]["unk_token"] = "<nope>"; });
  EXPECT_TRUE(mentions(msg, {"model.unk_token", "<nope>"})) << msg;
  msg = with([](json& j) { j["model"].erase("vocab"); });
  EXPECT_TRUE(mentions(msg, {"model", "vocab"})) << msg;
  msg = with([](json& j) { j["pre_tokenizer"] = {{"type", "Split"}, {"behavior", "Isolated"},
                                                  {"pattern", {{"Regex", "(unclosed"}}}}; });
  EXPECT_TRUE(mentions(msg, {"pre_tokenizer.pattern", "regex"})) << msg;
  msg = load_error([](TempDir& d) {
    d.write("tokenizer.json", spm_tokenizer().dump());
    d.write("tokenizer_config.json", R"({"eos_token": "<eos>"})");
  });
  EXPECT_TRUE(mentions(msg, {"tokenizer_config.json", "eos_token", "<eos>"})) << msg;
  // An added id far past the vocabulary is refused before any table is sized by it.
  msg = with([](json& j) {
    j["added_tokens"] = json::array({{{"id", (1 << 24) - 1}, {"content", "<big>"}, {"special", true}}});
  });
  EXPECT_TRUE(mentions(msg, {"added token id 16777215", "far past"})) << msg;
}

}  // namespace

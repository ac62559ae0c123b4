// The token mask's precomputation (the byte automaton of entry walks, the chain entries shared
// by the rules of a bounded repetition) against the plain matcher walk over every token, on the
// real Llama 3.2 vocabulary (scripts/fetch-tokenizers; skipped without it) and on small
// vocabularies that reach the ends of short chains.
#include <gtest/gtest.h>

#include <filesystem>
#include <random>

#include "common/brute_force_mask.h"
#include "core/thread_pool.h"
#include "grammar/gbnf_parser.h"
#include "grammar/json_schema.h"
#include "grammar/token_mask.h"
#include "tokenizer/tokenizer.h"

using namespace lite_llama;
using namespace lite_llama::grammar;

namespace {

std::shared_ptr<TokenVocab> llama_vocab() {
  static std::shared_ptr<TokenVocab> vocab = [] {
    const std::string dir = std::string(LL_SOURCE_DIR) + "/models/tokenizers/llama3.2";
    if (!std::filesystem::exists(dir + "/tokenizer.json")) return std::shared_ptr<TokenVocab>();
    auto tok = Tokenizer::from_hf_dir(dir);
    std::vector<std::string> bytes(size_t(tok->vocab_size()));
    for (int32_t i = 0; i < tok->vocab_size(); ++i)  // as engine/grammar_cache.cpp builds it
      if (!tok->is_control(i)) bytes[size_t(i)] = tok->token_bytes(i);
    for (int32_t t : tok->stop_ids())
      if (t >= 0 && t < tok->vocab_size()) bytes[size_t(t)].clear();
    return std::make_shared<TokenVocab>(std::move(bytes), tok->stop_ids());
  }();
  return vocab;
}

// Random walks (random allowed tokens; short ones half the time so that walks reach the ends
// of chains), comparing the mask with the plain walk every `every` steps.
void check_walks(const CompiledGrammar& cg, int walks, int steps, int every, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const TokenVocab& v = cg.vocab();
  for (int w = 0; w < walks; ++w) {
    Matcher m = cg.matcher();
    std::string text;
    for (int s = 0; s < steps; ++s) {
      std::vector<uint32_t> got(v.mask_words());
      cg.fill_mask(m, got.data());
      if (s % every == 0) ASSERT_EQ(got, test_util::brute_force_mask(m, v)) << "after '" << text << "'";
      std::vector<int32_t> allowed, shorter;
      for (int32_t t = 0; t < v.size(); ++t)
        if ((got[size_t(t) / 32] >> (t % 32)) & 1u && !v.bytes(t).empty()) {
          allowed.push_back(t);
          if (v.bytes(t).size() <= 2) shorter.push_back(t);
        }
      if (allowed.empty()) break;
      const auto& from = !shorter.empty() && rng() % 2 ? shorter : allowed;
      const int32_t t = from[rng() % from.size()];
      ASSERT_TRUE(m.accept_bytes(v.bytes(t)));
      m.commit();
      text += v.bytes(t);
    }
  }
}

const char* kSchema = R"({"type": "object", "properties": {"name": {"type": "string", "maxLength": 12},
  "age": {"type": "integer"}, "skills": {"type": "array", "items": {"type": "string", "maxLength": 5}, "maxItems": 3},
  "zip": {"type": "string", "pattern": "^[0-9]{5}$"}}, "required": ["name", "skills", "zip"]})";

}  // namespace

TEST(TokenMaskVocab, ChainPositionsShareTheLongestRule) {
  const Grammar g = compile_gbnf("root ::= [a-c]{2,6} \"x\"{0,1} (\"-\" [0-9]){0,3}");
  int byte_chain = 0, rule_chain = 0;
  for (size_t p = 0; p < g.elems().size(); ++p) {
    const Grammar::ChainPos& c = g.chain(int32_t(p));
    if (c.canon < 0) continue;
    EXPECT_EQ(g.chain(c.canon).canon, c.canon);
    if (g.bytes(c.first).test('a')) {
      EXPECT_FALSE(g.bytes(c.first).test('d'));
      ++byte_chain;
    } else {
      EXPECT_TRUE(g.bytes(c.first).test('-'));
      EXPECT_FALSE(g.bytes(c.first).test('0'));
      ++rule_chain;
    }
  }
  EXPECT_EQ(byte_chain, 4);  // [a-c]{2,6}: 4 optional repetitions; "x"{0,1} is no chain
  EXPECT_EQ(rule_chain, 3);
}

TEST(TokenMaskVocab, ShortChainsMatchPlainWalk) {
  std::vector<std::string> v{""};
  for (int b = 32; b < 127; ++b) v.push_back(std::string(1, char(b)));
  for (const char* s : {"  ", "   ", "    ", " \"", "  \"", "\"a", "ab", "abc", "abcd", "abcde", "abcdef", "a\"",
                        "ab\"", "abc\",", "\",\"", "\", \"", "\"]", "-1", "-1-2", "-1-2-3", "-1-2-3-4", "1-2",
                        "aa", "aaa", "aaaa", "aaaaaaa", "bb\"}", "\n", "\n\n", " \n ", "\t \t"})
    v.push_back(s);
  auto vocab = std::make_shared<TokenVocab>(v, std::vector<int32_t>{0});
  const std::string gbnf = "root ::= \"[\" ws (\"\\\"\" [a-c]{0,5} \"\\\"\" ws (\",\" ws \"\\\"\" [a-c]{0,5} \"\\\"\" ws){0,3})? \"]\" (\"-\" [0-9]){0,4}\n"
                           "ws ::= [ \\t\\n]{0,3}";
  for (size_t few : {size_t(0), size_t(2), size_t(1000)}) {
    CompiledGrammar cg(compile_gbnf(gbnf), vocab, few);
    check_walks(cg, 40, 30, 1, 31 + few);
  }
}

TEST(TokenMaskVocab, LlamaVocabularyMatchesPlainWalk) {
  auto vocab = llama_vocab();
  if (!vocab) GTEST_SKIP() << "models/tokenizers/llama3.2 missing (scripts/fetch-tokenizers)";
  CompiledGrammar cg(compile_gbnf(json_schema_to_gbnf(nlohmann::ordered_json::parse(kSchema))), vocab);
  check_walks(cg, 6, 60, 4, 5);
}

// few = 0 deepens every entry down to the whole stack: narrowed entries at every depth.
TEST(TokenMaskVocab, LlamaVocabularyDeepEntriesMatchPlainWalk) {
  auto vocab = llama_vocab();
  if (!vocab) GTEST_SKIP() << "models/tokenizers/llama3.2 missing (scripts/fetch-tokenizers)";
  CompiledGrammar cg(compile_gbnf(json_schema_to_gbnf(nlohmann::ordered_json::parse(kSchema))), vocab, 0);
  check_walks(cg, 3, 50, 5, 9);
}

// The benchmark-like schema on the real vocabulary: after a finished warm-up the walks' masks
// still equal the plain walk's, and no walk builds an entry (the warm-up covered them).
TEST(TokenMaskVocab, LlamaVocabularyWarmedMatchesPlainWalk) {
  auto vocab = llama_vocab();
  if (!vocab) GTEST_SKIP() << "models/tokenizers/llama3.2 missing (scripts/fetch-tokenizers)";
  CompiledGrammar cg(compile_gbnf(json_schema_to_gbnf(nlohmann::ordered_json::parse(kSchema))), vocab);
  ThreadPool pool(2);
  WarmBudget b;
  b.max_ms = 1e6;  // a loaded test machine must not turn this into a partial warm-up
  b.max_entries = 1 << 20;
  ASSERT_TRUE(cg.warm(&pool, b).finished);
  const long built = cg.stats().entries;
  check_walks(cg, 6, 60, 4, 5);
  EXPECT_EQ(cg.stats().entries, built);
}

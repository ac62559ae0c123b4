// Token masks from the cached per-position walk against the plain definition: a token is
// allowed exactly when the matcher accepts all its bytes (stop tokens: when it may end).
#include <gtest/gtest.h>

#include <atomic>
#include <random>
#include <thread>

#include "core/thread_pool.h"
#include "grammar/gbnf_parser.h"
#include "grammar/json_schema.h"
#include "grammar/token_mask.h"
#include "common/brute_force_mask.h"

using namespace lite_llama::grammar;

namespace {

// Every byte, plus multi-byte pieces that cross rule boundaries in JSON.
std::shared_ptr<TokenVocab> make_vocab() {
  std::vector<std::string> v;
  v.push_back("");  // a control token: never allowed
  for (int b = 0; b < 256; ++b) v.push_back(std::string(1, char(b)));
  for (const char* s : {"{\"", "\":", "\", \"", "\"}", "},", "}]", "[{", ": ", " \"", "name", "Ann",
                        "age", "true", "tr", "ue", "null", "12", "3.", ".5", "e+", "\\u00", "\":\"",
                        "\"name\":", ",\"", "  ", "\n  ", "é", "\xC3", "\xA9\"", "ab", "abc", "abcd",
                        "x\"}", "1,", "0}", "-1", "]}", "\"]", "\",\"", " ", "\n", "{}", "[]"})
    v.push_back(s);
  return std::make_shared<TokenVocab>(v, std::vector<int32_t>{0});
}

std::vector<uint32_t> brute_force(Matcher& m, const TokenVocab& v) { return lite_llama::test_util::brute_force_mask(m, v); }

// Random walk: at each step compare masks, then take a random allowed token.
void check_walks(const CompiledGrammar& cg, int walks, int steps, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const TokenVocab& v = cg.vocab();
  for (int w = 0; w < walks; ++w) {
    Matcher m = cg.matcher();
    std::string text;
    for (int s = 0; s < steps; ++s) {
      std::vector<uint32_t> got(v.mask_words());
      cg.fill_mask(m, got.data());
      const auto want = brute_force(m, v);
      ASSERT_EQ(got, want) << "after '" << text << "'";
      std::vector<int32_t> allowed;
      for (int32_t t = 1; t < v.size(); ++t)
        if ((got[size_t(t) / 32] >> (t % 32)) & 1u) allowed.push_back(t);
      if (allowed.empty()) break;
      const int32_t t = allowed[rng() % allowed.size()];
      ASSERT_TRUE(m.accept_bytes(v.bytes(t)));
      m.commit();
      text += v.bytes(t);
    }
  }
}

}  // namespace

TEST(TokenMask, JsonSchemaMatchesBruteForce) {
  const std::string gbnf = json_schema_to_gbnf(nlohmann::ordered_json::parse(R"({
    "type": "object",
    "properties": {"name": {"type": "string", "maxLength": 6}, "age": {"type": "integer"},
                   "tags": {"type": "array", "items": {"enum": ["a", "b"]}}},
    "required": ["name"], "additionalProperties": false})"));
  CompiledGrammar cg(compile_gbnf(gbnf), make_vocab());
  check_walks(cg, 30, 40, 1);
}

TEST(TokenMask, GenericJsonMatchesBruteForce) {
  CompiledGrammar cg(compile_gbnf(json_object_gbnf()), make_vocab());
  check_walks(cg, 30, 30, 2);
}

// few = 0: every head's entry is deepened down to the whole stack, through the incremental
// builds that keep the shallower entry's verdicts; few = 1 stops part way.
TEST(TokenMask, DeepEntriesMatchBruteForce) {
  const std::string gbnf = json_schema_to_gbnf(nlohmann::ordered_json::parse(R"({
    "type": "object",
    "properties": {"name": {"type": "string", "maxLength": 6}, "age": {"type": "integer"},
                   "tags": {"type": "array", "items": {"type": "string", "maxLength": 3}, "maxItems": 3}},
    "required": ["name", "tags"]})"));
  for (size_t few : {size_t(0), size_t(1)}) {
    CompiledGrammar cg(compile_gbnf(gbnf), make_vocab(), few);
    check_walks(cg, 30, 40, 7 + few);
    CompiledGrammar generic(compile_gbnf(json_object_gbnf()), make_vocab(), few);
    check_walks(generic, 20, 40, 11 + few);
  }
}

TEST(TokenMask, StopOnlyWhenComplete) {
  CompiledGrammar cg(compile_gbnf("root ::= \"ab\" | \"abcd\""), make_vocab());
  const TokenVocab& v = cg.vocab();
  Matcher m = cg.matcher();
  std::vector<uint32_t> mask(v.mask_words());
  auto allowed = [&](const std::string& s) {
    for (int32_t t = 0; t < v.size(); ++t)
      if (v.bytes(t) == s) return bool((mask[size_t(t) / 32] >> (t % 32)) & 1u);
    return false;
  };
  cg.fill_mask(m, mask.data());
  EXPECT_FALSE(mask[0] & 1u);
  EXPECT_TRUE(allowed("ab"));
  EXPECT_TRUE(allowed("abcd"));
  EXPECT_TRUE(allowed("abc"));
  EXPECT_FALSE(allowed("b"));
  ASSERT_TRUE(m.accept_bytes("ab"));
  cg.fill_mask(m, mask.data());
  EXPECT_TRUE(mask[0] & 1u);  // stop token 0 once "ab" is complete
  EXPECT_TRUE(allowed("c"));
  EXPECT_FALSE(allowed("d"));
}

// Bounded whitespace followed by a constrained byte: tokens such as " the" or " \"a" run past
// the end of the whitespace rule, so an entry of its frames alone cannot settle them (any
// shortcut that rejects on what follows a rule must agree with brute force here).
TEST(TokenMask, WhitespaceThenConstrainedByteMatchesBruteForce) {
  const std::string gbnf = R"(root ::= "{" ws "\"a\"" ws ":" ws ("true" | "1") ws "}"
ws ::= [ \t\n]{0,5})";
  auto base = make_vocab();
  std::vector<std::string> v;
  for (int32_t t = 0; t < base->size(); ++t) v.push_back(base->bytes(t));
  for (const char* s : {" the", " t", " tr", " true", "  \"a", " \"a\"", " :", ": t", ":1", " 1 }", "\n}",
                        "\t\"", " \"b", " }", " {", "  :", " :\t"})
    v.push_back(s);
  auto vocab = std::make_shared<TokenVocab>(v, std::vector<int32_t>{0});
  for (size_t few : {size_t(0), size_t(1), size_t(1000)}) {
    CompiledGrammar cg(compile_gbnf(gbnf), vocab, few);
    check_walks(cg, 30, 20, 21 + few);
  }
}

// Warm-up: the entries built ahead of decode give the same masks as a cold grammar's (brute
// force), and once a warm-up finished within its budget, walks build no entry of their own:
// the enumeration of stacks covers every stack a matcher can hold.
namespace {

const char* kWarmSchema = R"({"type": "object",
  "properties": {"name": {"type": "string", "maxLength": 6}, "age": {"type": "integer"},
                 "tags": {"type": "array", "items": {"type": "string", "maxLength": 3}, "maxItems": 3},
                 "ok": {"type": "boolean"}},
  "required": ["name", "tags"]})";

std::vector<std::string> warm_grammars() {
  return {json_schema_to_gbnf(nlohmann::ordered_json::parse(kWarmSchema)), json_object_gbnf(),
          "root ::= \"{\" ws \"\\\"a\\\"\" ws \":\" ws (\"true\" | \"1\") ws \"}\"\nws ::= [ \\t\\n]{0,5}",
          "root ::= item (\",\" item){0,3}\nitem ::= [a-c]{1,4} | \"(\" root \")\""};
}

}  // namespace

TEST(TokenMask, WarmedMasksMatchBruteForceAndBuildNothingMore) {
  lite_llama::ThreadPool pool(2);
  uint64_t seed = 41;
  for (const std::string& gbnf : warm_grammars())
    for (size_t few : {size_t(0), size_t(1), size_t(128)}) {
      SCOPED_TRACE(gbnf + " few " + std::to_string(few));
      CompiledGrammar cg(compile_gbnf(gbnf), make_vocab(), few);
      const WarmReport r = cg.warm(&pool);
      ASSERT_TRUE(r.finished);
      EXPECT_GT(r.entries, 0);
      const long built = cg.stats().entries;
      check_walks(cg, 20, 30, seed++);
      EXPECT_EQ(cg.stats().entries, built) << "walks built entries the warm-up missed";
    }
}

TEST(TokenMask, WarmUpKeepsToItsBudget) {
  const std::string gbnf = json_object_gbnf();
  lite_llama::ThreadPool pool(2);
  {
    CompiledGrammar cg(compile_gbnf(gbnf), make_vocab(), 0);
    WarmBudget b;
    b.max_entries = 5;
    const WarmReport r = cg.warm(&pool, b);
    EXPECT_FALSE(r.finished);
    EXPECT_GE(r.entries, 5);
    EXPECT_LE(r.entries, 5 + pool.size() + 1);  // builds in flight when the budget ran out, the start mask's
    check_walks(cg, 10, 30, 3);                  // the rest is built during the walks
  }
  {
    CompiledGrammar cg(compile_gbnf(gbnf), make_vocab(), 0);
    std::atomic<bool> cancel{true};
    WarmBudget b;
    b.cancel = &cancel;
    const WarmReport r = cg.warm(&pool, b);
    EXPECT_FALSE(r.finished);
    EXPECT_EQ(r.entries, 0);
  }
  {
    CompiledGrammar cg(compile_gbnf(gbnf), make_vocab(), 0);
    WarmBudget b;
    b.max_stacks = 3;
    EXPECT_FALSE(cg.warm(&pool, b).finished);
  }
  {
    CompiledGrammar cg(compile_gbnf(gbnf), make_vocab(), 0);
    WarmBudget b;
    b.max_bytes = 1;  // the first entry holding a token passes it
    const WarmReport r = cg.warm(&pool, b);
    EXPECT_FALSE(r.finished);
    CompiledGrammar full(compile_gbnf(gbnf), make_vocab(), 0);
    EXPECT_LT(r.entries, full.warm(&pool).entries);
    check_walks(cg, 10, 30, 4);
  }
}

// Masks filled on other threads while a warm-up runs equal the brute-force masks; several
// threads asking for one entry wait for one build of it.
TEST(TokenMask, WarmUpRunsBesideMaskFills) {
  for (size_t few : {size_t(0), size_t(128)}) {
    CompiledGrammar cg(compile_gbnf(json_schema_to_gbnf(nlohmann::ordered_json::parse(kWarmSchema))), make_vocab(),
                       few);
    std::thread warm([&] {
      lite_llama::ThreadPool pool(2);
      EXPECT_TRUE(cg.warm(&pool).finished);
    });
    std::vector<std::thread> fills;
    for (int t = 0; t < 2; ++t) fills.emplace_back([&, t] { check_walks(cg, 15, 30, 60 + uint64_t(t) + few); });
    warm.join();
    for (auto& f : fills) f.join();
  }
}

// GBNF parsing and the byte-level matcher: acceptance, prefixes, rollback, errors.
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <memory>
#include <string>

#include "core/error.h"
#include "grammar/gbnf_parser.h"
#include "grammar/matcher.h"
#include "grammar/token_mask.h"

using namespace lite_llama;
using namespace lite_llama::grammar;

namespace {

// 1: complete sentence, 0: valid prefix only, -1: rejected.
int status(const Grammar& g, const std::string& s) {
  Matcher m(g);
  if (!m.accept_bytes(s)) return -1;
  return m.can_end() ? 1 : 0;
}

std::string error_of(const std::string& text) {
  try {
    compile_gbnf(text);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(Gbnf, LiteralsAlternativesRepetition) {
  const Grammar g = compile_gbnf(R"(root ::= "ab" ("c" | "d")* x{2,3}
x ::= [0-9])");
  EXPECT_EQ(status(g, "ab12"), 1);
  EXPECT_EQ(status(g, "abcdc123"), 1);
  EXPECT_EQ(status(g, "ab1"), 0);
  EXPECT_EQ(status(g, "ab1234"), -1);
  EXPECT_EQ(status(g, "abe"), -1);
  EXPECT_EQ(status(g, ""), 0);
}

TEST(Gbnf, NegatedClassesAndUtf8) {
  const Grammar g = compile_gbnf(R"(root ::= "\"" [^"\\]* "\"")");
  EXPECT_EQ(status(g, "\"h\xC3\xA9llo \xF0\x9F\x98\x80\""), 1);
  EXPECT_EQ(status(g, "\"\xC3"), 0);           // half a character is a valid prefix
  EXPECT_EQ(status(g, "\"\xC3\x28"), -1);      // invalid UTF-8 continuation
  EXPECT_EQ(status(g, "\"\xED\xA0\x80\""), -1);  // a surrogate is not UTF-8
  EXPECT_EQ(status(g, "\"a\"b"), -1);
  const Grammar u = compile_gbnf("root ::= [\\u00e9-\\u00ea] \"\\x41\" .");
  EXPECT_EQ(status(u, "\xC3\xA9" "A\xE2\x82\xAC"), 1);
  EXPECT_EQ(status(u, "\xC3\xAB" "A."), -1);
}

TEST(Gbnf, CommentsNestingAndMultiline) {
  const Grammar g = compile_gbnf(R"(# a list
root ::= "[" (
    item ("," item)*   # items
  )? "]"
item ::= "x" | "y"
)");
  EXPECT_EQ(status(g, "[]"), 1);
  EXPECT_EQ(status(g, "[x,y,x]"), 1);
  EXPECT_EQ(status(g, "[x,]"), -1);
}

TEST(Gbnf, EmptyAlternativeAndNullableRules) {
  const Grammar g = compile_gbnf("root ::= a b \"!\"\na ::= \"a\" | \nb ::= \"b\"?");
  EXPECT_EQ(status(g, "!"), 1);
  EXPECT_EQ(status(g, "ab!"), 1);
  EXPECT_EQ(status(g, "b!"), 1);
  EXPECT_EQ(status(g, "ba!"), -1);
}

TEST(Gbnf, ErrorsAreOneLineAndNamed) {
  EXPECT_NE(error_of("root ::= \"abc").find("unterminated string"), std::string::npos);
  EXPECT_NE(error_of("root ::= [abc").find("unterminated character class"), std::string::npos);
  EXPECT_NE(error_of("root ::= foo").find("undefined rule 'foo'"), std::string::npos);
  EXPECT_NE(error_of("rot ::= \"a\"").find("no rule named 'root'"), std::string::npos);
  EXPECT_NE(error_of("root ::= root \"a\"").find("left-recursive"), std::string::npos);
  EXPECT_NE(error_of("root ::= (\"a\"").find("expected ')'"), std::string::npos);
  EXPECT_NE(error_of("root ::= \"a\"{3,1}").find("reversed"), std::string::npos);
  EXPECT_NE(error_of("root := \"a\"").find("line 1 col 6"), std::string::npos);
  EXPECT_NE(error_of("root ::= \"\\q\"").find("unknown escape"), std::string::npos);
  EXPECT_NE(error_of("").find("no rules"), std::string::npos);
  EXPECT_NE(error_of("root ::= \"a\"\nroot ::= \"b\"").find("defined twice"), std::string::npos);
  EXPECT_NE(error_of("root ::= " + std::string(500, '(')).find("nested deeper"), std::string::npos);
  for (const auto& bad : {"root ::= \"a\"\nx", "::=", "root ::= [^\\x00-\\U0010FFFF]"})
    EXPECT_EQ(error_of(bad).find('\n'), std::string::npos) << bad;
}

TEST(Matcher, RollbackRestoresState) {
  const Grammar g = compile_gbnf(R"(root ::= "ab" "c"* "d")");
  Matcher m(g);
  ASSERT_TRUE(m.accept_bytes("abcc"));
  EXPECT_FALSE(m.accept_byte('x'));
  m.rollback(2);
  EXPECT_EQ(m.history(), 2u);
  EXPECT_TRUE(m.accept_bytes("d"));
  EXPECT_TRUE(m.can_end());
  EXPECT_TRUE(m.stuck());
  m.rollback(1);
  EXPECT_FALSE(m.can_end());
  m.commit();
  EXPECT_EQ(m.history(), 0u);
  EXPECT_TRUE(m.accept_bytes("cccd"));
}

TEST(Matcher, LongInputsCompact) {
  const Grammar g = compile_gbnf(R"(root ::= ("ab" | "a" "b")* "." )");
  Matcher m(g);
  for (int i = 0; i < 5000; ++i) {
    ASSERT_TRUE(m.accept_bytes("ab"));
    m.commit();
  }
  EXPECT_TRUE(m.accept_byte('.'));
  EXPECT_TRUE(m.can_end());
}

TEST(Matcher, AmbiguousGrammarDoesNotExhaustTheStack) {
  // Repetitions of repetitions: exponentially many stacks. The fuzzer's input (a stack overflow
  // in the mask walk, tests/fuzz/corpus/grammar/regression_stacked_repeats): the matcher now
  // gives up on a step past its bounds, which refuses that byte, instead of crashing.
  std::ifstream f(std::string(LL_SOURCE_DIR) + "/tests/fuzz/corpus/grammar/regression_stacked_repeats",
                  std::ios::binary);
  const std::string input((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  ASSERT_GT(input.size(), 100u);
  std::vector<std::string> words{""};
  for (int b = 0; b < 256; ++b) words.push_back(std::string(1, char(b)));
  auto vocab = std::make_shared<TokenVocab>(words, std::vector<int32_t>{0});
  CompiledGrammar cg(compile_gbnf(input.substr(1)), vocab);
  Matcher m = cg.matcher();
  std::vector<uint32_t> mask(vocab->mask_words());
  for (char c : std::string("axyxyxyxyx")) {
    cg.fill_mask(m, mask.data());
    if (!m.accept_byte(uint8_t(c))) break;
  }
  // A plain grammar of the same shape still works.
  const Grammar small = compile_gbnf("root ::= \"a\" ((\"x\" | \"y\"){1,3}){1,3}");
  Matcher ok(small);
  EXPECT_TRUE(ok.accept_bytes("a" + std::string("xyxyxyxyx")));  // 9 = 3 x 3
  EXPECT_TRUE(ok.can_end());
  EXPECT_FALSE(ok.accept_byte('x'));
}

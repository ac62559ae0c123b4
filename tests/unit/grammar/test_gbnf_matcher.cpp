// GBNF parsing and the byte-level matcher: acceptance, prefixes, rollback, errors.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <fstream>
#include <iterator>
#include <memory>
#include <random>
#include <regex>
#include <set>
#include <string>

#include "core/error.h"
#include "grammar/gbnf_parser.h"
#include "grammar/matcher.h"
#include "grammar/regex_to_gbnf.h"
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

// Repeating an item that can be empty: accepted, with the language of the same regular
// expression under std::regex (the reference), on every string of up to 7 bytes over the
// alphabet. Such repetitions were refused as left-recursive, naming an internal rule.
TEST(Gbnf, RepeatedItemThatCanBeEmptyMatchesRegex) {
  struct Case {
    const char* gbnf;
    const char* regex;
    const char* alphabet;
  };
  const Case cases[] = {
      {R"(root ::= ([a-z ]? [a-z ]?)* "!")", "([a-z ]?[a-z ]?)*!", "a !1"},
      {R"(root ::= ("a"? "b"?){2,4} "!")", "(a?b?){2,4}!", "ab!"},
      {R"(root ::= ("a"? "b"?){2,} "!")", "(a?b?){2,}!", "ab!"},
      {"root ::= item* \".\"\nitem ::= \"x\" | \"yz\" | \"\"", "(x|yz|)*\\.", "xyz."},
      {R"(root ::= (("a"?)* "b")* "!")", "((a?)*b)*!", "ab!"},
      {R"(root ::= ("a"* | "b")+ "c")", "(a*|b)+c", "abc"},
      // Repetitions of rules defined after their use: x+ of x ::= y* was refused as left-recursive
      // when x's non-empty part copied y*'s rule before that rule was rewritten. The reference is
      // the language written plainly (((z|)*)+ is z*): nested quantifiers over empty matches
      // backtrack without end in std::regex and Python's re alike.
      {"root ::= x+ \".\"\nx ::= y*\ny ::= \"z\" | \"\"", "z*\\.", "za."},
      {"root ::= x+ \".\"\nx ::= y+\ny ::= z+\nz ::= \"q\"?", "q*\\.", "qz."},
      {"root ::= (x | y)* \".\"\nx ::= \"a\"?\ny ::= x*", "a*\\.", "ab."},
      // A sequence of one item's repetitions is one repetition, merged with the one around it
      // only where the counts leave no gap: (a a?){0,2} has lengths 0-4, (a a){0,3} only 0, 2, 4, 6.
      {R"(root ::= ("a" "a"?){0,2} "!")", "(aa?){0,2}!", "ab!"},
      {R"(root ::= ("a" "a"){0,3} "!")", "(aa){0,3}!", "a!"},
      {R"(root ::= ("a"? "a"{2}){1,3} "!")", "(a?a{2}){1,3}!", "a!"},
      {R"(root ::= ("a"? "b"? "a"?)* "!")", "(a?b?a?)*!", "ab!"},
      {R"(root ::= ([ab]? [ab]?){2,3} "b")", "([ab]?[ab]?){2,3}b", "abc"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.gbnf);
    Grammar g;
    ASSERT_NO_THROW(g = compile_gbnf(c.gbnf));
    const std::regex re(c.regex);
    const std::string alpha = c.alphabet;
    std::vector<std::string> level{""};
    int matched = 0;
    for (int len = 0; len <= 7; ++len) {
      std::vector<std::string> next;
      for (const std::string& s : level) {
        const bool want = std::regex_match(s, re);
        matched += want;
        EXPECT_EQ(status(g, s) == 1, want) << "'" << s << "'";
        for (char ch : alpha) next.push_back(s + ch);
      }
      level = std::move(next);
    }
    EXPECT_GT(matched, 3);
  }
}

// Random regular expressions over {a, b} (groups, alternation, a class, ? * + {m,n}, nested, so
// that many repeat an item that can be empty) through regex_grammar: each string of up to 6 bytes
// is a sentence exactly when Python's re.fullmatch accepts it
// (tests/fixtures/grammar/random_regexes.json, scripts/fixtures/make_regex_fixtures.py).
TEST(Gbnf, RandomRegexesMatchPythonRe) {
  std::ifstream f(std::string(LL_SOURCE_DIR) + "/tests/fixtures/grammar/random_regexes.json");
  ASSERT_TRUE(f) << "missing fixture";
  const nlohmann::json fixture = nlohmann::json::parse(f);
  std::vector<std::string> strings{""};
  for (size_t i = 0; strings.size() < 127; ++i)
    for (char c : {'a', 'b'}) strings.push_back(strings[i] + c);
  int cases = 0, sentences = 0;
  for (const auto& c : fixture["cases"]) {
    const std::string re = c["regex"], mask = c["mask"];
    SCOPED_TRACE(re);
    Grammar g;
    ASSERT_NO_THROW(g = compile_gbnf(regex_grammar(re)));
    for (size_t i = 0; i < strings.size(); ++i) {
      // Bit i of the hex mask: digit i / 4 from the right.
      const size_t d = i / 4;
      const bool want = d < mask.size() && (std::stoi(mask.substr(mask.size() - 1 - d, 1), nullptr, 16) >> (i % 4)) & 1;
      sentences += want;
      ASSERT_EQ(status(g, strings[i]) == 1, want) << "'" << strings[i] << "'";
    }
    ++cases;
  }
  EXPECT_EQ(cases, 500);
  EXPECT_GT(sentences, 1000);
}

// Long chains of rules (within the element limit) are refused with a one-line error, not a stack
// overflow: the lowering's walks (nullable rules, non-empty parts, left recursion, first bytes)
// are worklists and explicit stacks.
TEST(Gbnf, LongRuleChainsAreRefusedNotCrashing) {
  for (const char* tail : {"?", ""}) {
    std::string g = "root ::= r1* \"!\"\n";
    for (int i = 1; i < 100000; ++i) g += "r" + std::to_string(i) + " ::= r" + std::to_string(i + 1) + tail + "\n";
    g += "r100000 ::= \"z\" | \"\"\nunused ::= \"a\"{2,4}\n";
    const std::string e = error_of(g);
    EXPECT_NE(e.find("too large or ambiguous"), std::string::npos) << e;
    EXPECT_EQ(e.find('\n'), std::string::npos);
  }
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
  // in the mask walk, tests/fuzz/corpus/grammar/regression_stacked_repeats) nests {1,3} ~100
  // deep: the lowering merges nested repetitions and refuses them past its limit.
  std::ifstream f(std::string(LL_SOURCE_DIR) + "/tests/fuzz/corpus/grammar/regression_stacked_repeats",
                  std::ios::binary);
  const std::string input((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  ASSERT_GT(input.size(), 100u);
  EXPECT_NE(error_of(input.substr(1)).find("too ambiguous for the matcher"), std::string::npos)
      << error_of(input.substr(1));
  // Nested repetitions that cannot merge (a "y"? between them) still multiply the stacks: the
  // matcher gives up on a step past its bounds, which refuses that byte and says so, instead of
  // crashing; the masks stay computable.
  std::string text = "\"x\"";
  for (int i = 0; i < 40; ++i) text = "(" + text + " \"y\"?){1,3}";
  std::vector<std::string> words{""};
  for (int b = 0; b < 256; ++b) words.push_back(std::string(1, char(b)));
  auto vocab = std::make_shared<TokenVocab>(words, std::vector<int32_t>{0});
  CompiledGrammar cg(compile_gbnf("root ::= \"a\" [b-z]* " + text), vocab);
  Matcher m = cg.matcher();
  std::vector<uint32_t> mask(vocab->mask_words());
  bool refused = false;
  for (char c : "a" + std::string(200, 'x')) {
    cg.fill_mask(m, mask.data());
    if (!m.accept_byte(uint8_t(c))) {
      refused = true;
      break;
    }
    EXPECT_FALSE(m.overflowed());
  }
  EXPECT_TRUE(refused);
  EXPECT_TRUE(m.overflowed());
  EXPECT_TRUE(m.accept_byte('y'));  // a byte with fewer stacks still goes on
  EXPECT_FALSE(m.overflowed());
  // A plain grammar of the same shape still works.
  const Grammar small = compile_gbnf("root ::= \"a\" ((\"x\" | \"y\"){1,3}){1,3}");
  Matcher ok(small);
  EXPECT_TRUE(ok.accept_bytes("a" + std::string("xyxyxyxyx")));  // 9 = 3 x 3
  EXPECT_TRUE(ok.can_end());
  EXPECT_FALSE(ok.accept_byte('x'));
  EXPECT_FALSE(ok.overflowed());
}

TEST(Matcher, NestedRepetitionsAcceptLongText) {
  // (x{0,p}){0,q}: the ways to split a count into groups made ~10^4 stacks after 99 characters,
  // past the matcher's bounds, while the token mask allowed the next token (grammar_dead_end on
  // "the sampled token is outside the grammar").
  for (const char* re : {"(.{0,99}){0,99}", "(.{0,500}){0,500}"}) {
    const Grammar g = compile_gbnf(regex_grammar(re));
    Matcher m(g);
    std::string text;
    for (int i = 0; i < 100; ++i) text += i % 7 ? "ab" : "\xc3\xa9";  // ASCII and a 2-byte character
    text += std::string(100, ' ');
    ASSERT_EQ(text.size(), 300u);
    for (size_t i = 0; i < text.size(); i += 10) {
      ASSERT_TRUE(m.accept_bytes(text.substr(i, 10))) << re << " at " << i;
      m.commit();
    }
    EXPECT_TRUE(m.can_end());
    EXPECT_FALSE(m.accept_byte('\n'));
    EXPECT_FALSE(m.overflowed());
  }
  // A repeated group of optional items of one class, as a sequence, had the groups' counts times
  // the places of a character among their items as stacks: past the matcher's bound on a step
  // after a few characters (a grammar error mid-output). The items add up to .{0,8}, which merges
  // with the repetition around it.
  std::string abs;
  for (int i = 0; i < 900; ++i) abs += "ab";
  const std::pair<const char*, std::string> long_cases[] = {
      {"(.?.?.?.?.?.?.?.?){0,997}", std::string(7000, 'q')},  // .{0,7976}
      {"(a?a?a){1,400}", std::string(1200, 'a')},              // a{1,1200}
      {"((ab)?(ab)?){0,500}x", abs + "x"},                     // (ab){0,1000}x
      // Not merged: an item that can be empty (merged, (a?b?){42,} under {0,16} went past the
      // bound at the 9th byte) and sums past kMaxSeqMerge (merged, the first lowered to 2 million
      // elements, over the limit, and the second was refused as nesting 280,000 repetitions).
      {"(((a?b?)(a?b?){5,}){7}){0,16}", abs.substr(0, 400)},
      {"((((a|)(a|){5,}){7}){0,8}){0,2}", std::string(400, 'a')},
      {"(a{1000,2000}a{1000,2000}){1,62}(b{1000,2000}b{1000,2000}){1,62}", std::string(3000, 'a') + std::string(3000, 'b')},
      {"(a{100,200}a{100,200}){1,700}", std::string(5000, 'a')},
  };
  for (const auto& [re, text] : long_cases) {
    const Grammar g = compile_gbnf(regex_grammar(re));
    Matcher m(g);
    for (size_t i = 0; i < text.size(); i += 50) {
      ASSERT_TRUE(m.accept_bytes(text.substr(i, 50))) << re << " at " << i;
      ASSERT_FALSE(m.overflowed()) << re << " at " << i;
      m.commit();
    }
    EXPECT_TRUE(m.can_end()) << re;
  }
  // Nested repetitions that stay nested (something between them): equal stacks made in
  // different steps were distinct nodes, ~2x the heads here; interned, each stack is one head.
  const Grammar g = compile_gbnf(R"(root ::= ("a"{0,30} ","?){0,30})");
  Matcher m(g);
  std::vector<int32_t> stack;
  for (int i = 0; i < 30; ++i) {
    ASSERT_TRUE(m.accept_bytes(std::string(20, 'a'))) << i;
    m.commit();
    std::set<std::vector<int32_t>> distinct;
    for (size_t h = 0; h < m.num_heads(); ++h) {
      m.head_stack(h, 1000, stack);
      distinct.insert(stack);
    }
    ASSERT_EQ(distinct.size(), m.num_heads()) << "after " << 20 * (i + 1) << " bytes";
  }
  EXPECT_TRUE(m.can_end());
}

TEST(Matcher, NestedRepetitionsKeepTheirCounts) {
  // x{a,p} repeated {m,q} takes the counts in [ka, kp] for k in [m, q]: merged into one
  // repetition only where those leave no gap.
  for (int a = 0; a <= 3; ++a)
    for (int p = a; p <= 4; ++p)
      for (int lo = 0; lo <= 3; ++lo)
        for (int hi = lo; hi <= 4; ++hi) {
          const std::string rule = "root ::= (\"x\"{" + std::to_string(a) + "," + std::to_string(p) + "}){" +
                                   std::to_string(lo) + "," + std::to_string(hi) + "}";
          const Grammar g = compile_gbnf(rule);
          for (int n = 0; n <= 17; ++n) {
            bool want = false;
            for (int k = lo; k <= hi; ++k) want = want || (n >= k * a && n <= k * p);
            EXPECT_EQ(status(g, std::string(size_t(n), 'x')) == 1, want) << rule << " n=" << n;
          }
        }
  // Unbounded ones: (x{2,})* takes 0 and 2.. but not 1; (x{0,2})+ and (x+){2,3} merge.
  const Grammar g1 = compile_gbnf(R"(root ::= ("x"{2,})*)");
  EXPECT_EQ(status(g1, ""), 1);
  EXPECT_EQ(status(g1, "x"), 0);
  EXPECT_EQ(status(g1, "xxxxxxx"), 1);
  const Grammar g2 = compile_gbnf(R"(root ::= ("x"+){2,3} "." )");
  EXPECT_EQ(status(g2, "x."), -1);
  EXPECT_EQ(status(g2, std::string(50, 'x') + "."), 1);
  EXPECT_NE(error_of(R"(root ::= ("x"{0,999}){0,999})").find("more than 250000 repetitions"), std::string::npos);
}

TEST(Matcher, InternedNodesSurviveRollbackAndCommit) {
  // Call frames are shared between steps (one id per content): random accepts, rollbacks and
  // commits (past 4096 nodes, which renumbers them) must leave the state a fresh matcher reaches
  // on the same text.
  const Grammar g = compile_gbnf(R"g(
root ::= item+ "."
item ::= "(" item* ")" | "x" ("," | "x"{1,3})* | ("x" | "xx") "y"?
)g");
  std::mt19937 rng(7);
  const std::string alphabet = "(((xxx,y)))";
  Matcher m(g);
  std::string done, pending;  // committed text, text since the commit
  std::string key, want;
  for (int op = 0; op < 20000; ++op) {
    const int r = int(rng() % 100);
    if (r < 80) {
      const char c = alphabet[rng() % alphabet.size()];
      if (m.accept_byte(uint8_t(c))) pending += c;
    } else if (r < 95) {
      const size_t n = rng() % (m.history() + 1);
      m.rollback(n);
      pending.resize(pending.size() - n);
    } else {
      m.commit();
      done += pending;
      pending.clear();
    }
    ASSERT_EQ(m.history(), pending.size());
    if (op % 97 == 0 || op > 19900) {
      Matcher fresh(g);
      ASSERT_TRUE(fresh.accept_bytes(done + pending));
      fresh.state_key(want);
      m.state_key(key);
      ASSERT_EQ(key, want) << "op " << op;
    }
  }
  EXPECT_GT(done.size(), 5000u);
}

TEST(Gbnf, LargeEnumsCompileAndTooLargeOnesAreRefused) {
  // 15,000 alternatives took ~70 s to their first tokens: each token-mask entry began from a
  // matcher at the root, which expanded every alternative again.
  auto choices = [](int n) {
    std::string text = "root ::= ";
    for (int i = 0; i < n; ++i) text += (i ? " | \"v" : "\"v") + std::to_string(i) + "\"";
    return text;
  };
  std::vector<std::string> words{"", "v", "1", "v1", "99", "4", "v14"};
  for (int b = '0'; b <= '9'; ++b) words.push_back(std::string(1, char(b)));
  auto vocab = std::make_shared<TokenVocab>(words, std::vector<int32_t>{0});
  CompiledGrammar cg(compile_gbnf(choices(15000)), vocab);
  Matcher m = cg.matcher();
  std::vector<uint32_t> mask(vocab->mask_words());
  for (const std::string& tok : {"v14", "99", "9"}) {
    cg.fill_mask(m, mask.data());
    const auto id = size_t(std::find(words.begin(), words.end(), tok) - words.begin());
    EXPECT_TRUE((mask[id / 32] >> (id % 32)) & 1u) << tok;
    ASSERT_TRUE(m.accept_bytes(tok)) << tok;
  }
  EXPECT_TRUE(m.can_end());
  EXPECT_TRUE(m.stuck());
  // Past the limits: one line naming the limit, before any decoding.
  EXPECT_EQ(error_of(choices(40000)), "grammar: rule 'root' has 40000 alternatives, more than the limit of 32768");
  std::string wide = "root ::= ";
  for (int i = 0; i < 600; ++i) wide += "[a-z]{0,2000} ";
  EXPECT_NE(error_of(wide).find("more than the limit of 1048576"), std::string::npos) << error_of(wide);
}

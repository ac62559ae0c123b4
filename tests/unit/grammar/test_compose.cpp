// Composed grammars: renaming rules in GBNF text, and an answer grammar behind <think>.
#include <gtest/gtest.h>

#include "grammar/compose.h"
#include "grammar/gbnf_parser.h"
#include "grammar/json_schema.h"
#include "grammar/matcher.h"

using namespace lite_llama::grammar;

namespace {
bool matches(const Grammar& g, const std::string& s) {
  Matcher m(g);
  return m.accept_bytes(s) && m.can_end();
}
}  // namespace

TEST(Compose, RenameTouchesOnlyRuleNames) {
  const std::string g = "root ::= \"root\" [root] item root-2 # root\nroot-2 ::= root?\nitem ::= \"x\"";
  EXPECT_EQ(rename_rule(g, "root", "top"),
            "top ::= \"root\" [root] item root-2 # root\nroot-2 ::= top?\nitem ::= \"x\"");
}

TEST(Compose, AnswerAfterThinking) {
  const auto schema = nlohmann::ordered_json::parse(R"({"type": "object", "properties": {"a": {"type": "integer"}},
                                                        "required": ["a"], "additionalProperties": false})");
  const Grammar g = compile_gbnf(after_think(json_schema_to_gbnf(schema), false));
  EXPECT_TRUE(matches(g, "{\"a\": 1}"));
  EXPECT_TRUE(matches(g, "<think>\nFirst </thin k>, then << </think\xC3\xA9 <</think>\n\n{\"a\": 2}"));
  EXPECT_TRUE(matches(g, "<think></think>{\"a\": 3}"));
  EXPECT_FALSE(matches(g, "<think>a</think>b</think>{\"a\": 1}"));  // the block ends at the first tag
  EXPECT_FALSE(matches(g, "<think>no end {\"a\": 1}"));
  EXPECT_FALSE(matches(g, "hello {\"a\": 1}"));
  const Grammar opened = compile_gbnf(after_think(json_schema_to_gbnf(schema), true));
  EXPECT_TRUE(matches(opened, "I should answer.</think>\n{\"a\": 4}"));
  EXPECT_FALSE(matches(opened, "{\"a\": 4}"));
}

// JSON Schema and regex compilers against independent verdicts: Python jsonschema's
// (tests/fixtures/grammar/json_schema_cases.json, scripts/fixtures/make_grammar_fixtures.py)
// and hand-checked regex matches.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.h"
#include "grammar/gbnf_parser.h"
#include "grammar/json_schema.h"
#include "grammar/matcher.h"
#include "grammar/regex_to_gbnf.h"

using namespace lite_llama;
using namespace lite_llama::grammar;
using json = nlohmann::ordered_json;

namespace {

bool matches(const Grammar& g, const std::string& s) {
  Matcher m(g);
  return m.accept_bytes(s) && m.can_end();
}

std::string schema_error(const json& schema) {
  try {
    compile_gbnf(json_schema_to_gbnf(schema));
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

std::string regex_error(const std::string& re) {
  try {
    compile_gbnf(regex_grammar(re));
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(JsonSchema, MatchesPythonJsonschemaVerdicts) {
  std::ifstream f(std::string(LL_SOURCE_DIR) + "/tests/fixtures/grammar/json_schema_cases.json");
  ASSERT_TRUE(f) << "missing fixture";
  const json fixture = json::parse(f);
  int checked = 0;
  for (const auto& c : fixture["cases"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    const Grammar g = compile_gbnf(json_schema_to_gbnf(c["schema"]));
    // "sound" cases: the grammar writes a subset, so what it accepts must be valid.
    const bool sound = c.value("sound", false);
    for (const auto& cand : c["candidates"]) {
      const std::string text = cand["text"];
      if (sound) EXPECT_TRUE(!matches(g, text) || cand["valid"].get<bool>()) << text;
      else EXPECT_EQ(matches(g, text), cand["valid"].get<bool>()) << text;
      ++checked;
    }
  }
  EXPECT_GT(checked, 60);
}

TEST(JsonSchema, JsonObjectIsAnyObject) {
  const Grammar g = compile_gbnf(json_object_gbnf());
  EXPECT_TRUE(matches(g, R"({"a": [1, 2.5, {"b": null}], "c": "\u00e9\n"})"));
  EXPECT_TRUE(matches(g, "{}"));
  EXPECT_FALSE(matches(g, "[1]"));
  EXPECT_FALSE(matches(g, R"({"a": 1,})"));
  EXPECT_FALSE(matches(g, R"({"a": tru})"));
}

TEST(JsonSchema, UnsupportedKeywordsAreNamed) {
  EXPECT_NE(schema_error({{"type", "object"}, {"patternProperties", {{"^a", {{"type", "integer"}}}}}})
                .find("'patternProperties'"),
            std::string::npos);  // open objects would need the pattern's complement
  EXPECT_NE(schema_error({{"type", "object"}, {"properties", {{"ab", true}}}, {"additionalProperties", false},
                          {"patternProperties", {{"^a", {{"type", "integer"}}}}}})
                .find("declared property 'ab'"),
            std::string::npos);
  EXPECT_NE(schema_error({{"type", "array"}, {"uniqueItems", true}}).find("'uniqueItems'"), std::string::npos);
  EXPECT_NE(schema_error({{"type", "number"}, {"multipleOf", 0.5}}).find("'multipleOf'"), std::string::npos);
  EXPECT_NE(schema_error({{"type", "integer"}, {"multipleOf", 3}, {"minimum", 0}, {"maximum", 100000}}).find("'multipleOf'"),
            std::string::npos);
  EXPECT_NE(schema_error({{"type", "number"}, {"maximum", 2.5}}).find("'maximum'"), std::string::npos);
  EXPECT_NE(schema_error({{"type", "number"}, {"minimum", 3}, {"exclusiveMaximum", 3}}).find("no value"), std::string::npos);
  EXPECT_NE(schema_error({{"allOf", {{{"type", "string"}}, {{"type", "integer"}}}}}).find("no type in common"),
            std::string::npos);
  EXPECT_NE(schema_error({{"allOf", {{{"type", "object"}, {"properties", {{"a", true}}}, {"additionalProperties", false}},
                                     {{"properties", {{"b", true}}}, {"required", {"b"}}}}}})
                .find("required property 'b'"),
            std::string::npos);
  EXPECT_NE(schema_error({{"allOf", {{{"pattern", "a"}}, {{"pattern", "b"}}}}}).find("'pattern'"), std::string::npos);
  EXPECT_NE(schema_error({{"not", {{"type", "string"}}}}).find("'not'"), std::string::npos);
  EXPECT_NE(schema_error({{"type", "object"}, {"minProperties", 2}}).find("'minProperties'"), std::string::npos);
  EXPECT_NE(schema_error({{"type", "object"}, {"properties", {{"a", true}}}, {"maxProperties", 2}}).find("'maxProperties'"),
            std::string::npos);
  EXPECT_NE(schema_error({{"type", "string"}, {"format", "hostname"}}).find("format"), std::string::npos);
  EXPECT_NE(schema_error({{"$ref", "http://x/y"}}).find("$ref"), std::string::npos);
  EXPECT_NE(schema_error({{"type", "wat"}}).find("unknown type 'wat'"), std::string::npos);
  EXPECT_NE(schema_error(false).find("matches nothing"), std::string::npos);
  EXPECT_NE(schema_error({{"type", "integer"}, {"minimum", 5}, {"maximum", 1}}).find("no value"), std::string::npos);
  json deep = {{"type", "string"}};
  for (int i = 0; i < 100; ++i) deep = {{"type", "array"}, {"items", deep}};
  EXPECT_NE(schema_error(deep).find("nested deeper"), std::string::npos);
  // allOf of anyOfs distributes: 2^20 alternatives are refused, not built.
  json wide = json::array();
  for (int i = 0; i < 20; ++i) wide.push_back({{"anyOf", {{{"type", "integer"}}, {{"type", "number"}}}}});
  EXPECT_NE(schema_error({{"allOf", wide}}).find("parts"), std::string::npos);
  EXPECT_EQ(schema_error({{"type", "object"}, {"title", "T"}, {"description", "d"}}), "");
}

TEST(JsonSchema, EnumAndConstKeepOnlyWhatTheOtherKeywordsAdmit) {
  // The admitted values themselves are checked against jsonschema in the fixture; here, the
  // refusals when none is left, and the spellings that still pass.
  EXPECT_NE(schema_error({{"type", "integer"}, {"const", "abc"}}).find("admit no value"), std::string::npos);
  EXPECT_NE(schema_error({{"type", "string"}, {"enum", {1, 2}}}).find("admit no value"), std::string::npos);
  EXPECT_NE(schema_error({{"const", 1}, {"enum", {2, 3}}}).find("admit no value"), std::string::npos);
  EXPECT_NE(schema_error({{"type", "string"}, {"maxLength", 2}, {"enum", {"abc"}}}).find("admit no value"),
            std::string::npos);
  EXPECT_NE(schema_error({{"allOf", {{{"type", "boolean"}}, {{"const", "true"}}}}}).find("admit no value"),
            std::string::npos);
  // A whole float is an integer; it is written as given.
  const Grammar g = compile_gbnf(json_schema_to_gbnf({{"type", "integer"}, {"const", 3.0}}));
  EXPECT_TRUE(matches(g, "3.0"));
  EXPECT_FALSE(matches(g, "3"));
  // Annotations beside enum constrain nothing.
  EXPECT_EQ(schema_error({{"enum", {"a"}}, {"title", "T"}, {"description", "d"}, {"examples", {"a"}},
                          {"default", "a"}, {"$comment", "c"}}),
            "");
}

TEST(JsonSchema, FormatIsEnforcedOrRefused) {
  EXPECT_NE(schema_error({{"type", "string"}, {"pattern", "^\\d+$"}, {"format", "date-time"}})
                .find("'pattern' with 'format' is not supported"),
            std::string::npos);
  EXPECT_NE(schema_error({{"allOf", {{{"type", "string"}, {"pattern", "^2"}}, {{"format", "date"}}}}})
                .find("'pattern' with 'format'"),
            std::string::npos);
  EXPECT_NE(schema_error({{"type", "string"}, {"format", "date"}, {"maxLength", 5}})
                .find("'format' with 'minLength' / 'maxLength' is not supported"),
            std::string::npos);
  EXPECT_NE(schema_error({{"type", "string"}, {"format", "time"}, {"minLength", 12}}).find("'format' with"),
            std::string::npos);
  // Lengths every string of the format fits are kept (nothing to cut).
  const Grammar g = compile_gbnf(json_schema_to_gbnf({{"type", "string"}, {"format", "date"}, {"maxLength", 10}}));
  EXPECT_TRUE(matches(g, "\"2024-01-02\""));
  EXPECT_FALSE(matches(g, "\"9\""));
}

// The fixture's format_email case checks that what the grammar accepts is valid; here, that
// ordinary addresses pass and non-addresses do not (jsonschema itself only asks for an '@').
TEST(JsonSchema, EmailFormat) {
  const Grammar g = compile_gbnf(json_schema_to_gbnf({{"type", "string"}, {"format", "email"}}));
  for (const char* ok : {R"("a.b+c@example.co.uk")", R"("\"quoted\"@x.org")", R"("\"a b\\\"c\"@x.org")",
                         R"("x@localhost")", R"("o'brien_1@x-y.example")"})
    EXPECT_TRUE(matches(g, ok)) << ok;
  for (const char* bad : {R"("ab.example.com")", R"("@x.org")", R"("a@")", R"("a b@x.org")", R"("a@x..org")",
                          R"("a@-x.org")", R"("a.@x.org")", R"(".a@x.org")", R"("a@x.org ")", R"("a@@x.org")",
                          R"("")"})
    EXPECT_FALSE(matches(g, bad)) << bad;
  // Unbounded: a minLength every address meets is kept, a maxLength is refused.
  EXPECT_EQ(schema_error({{"type", "string"}, {"format", "email"}, {"minLength", 3}}), "");
  EXPECT_NE(schema_error({{"type", "string"}, {"format", "email"}, {"maxLength", 254}}).find("'format' with"),
            std::string::npos);
}

// An extra key may not spell a declared name with escapes: it would skip that name's schema
// or repeat the key. Verdicts for the same texts are checked against jsonschema in the fixture.
TEST(JsonSchema, EscapedKeysCannotSpellDeclaredNames) {
  const json props = {{"a", {{"type", "integer"}}}, {"\xC3\xA9", {{"type", "integer"}}},
                      {"\xF0\x9F\x98\x80", {{"type", "integer"}}}, {"/", {{"type", "integer"}}},
                      {"q\"", {{"type", "integer"}}}};
  for (const json& extra : {json(true), json({{"type", "string"}})}) {
    const Grammar g = compile_gbnf(json_schema_to_gbnf({{"type", "object"}, {"properties", props},
                                                        {"additionalProperties", extra}}));
    for (const char* bad : {R"({"\u0061":"x"})", R"({"\u00e9":"x"})", R"({"\u00E9":"x"})",
                            R"({"\ud83d\ude00":"x"})", R"({"\uD83D\uDE00":"x"})", R"({"\/":"x"})",
                            R"({"q\u0022":"x"})", R"({"\u0071\"":"x"})", R"({"a":1,"\u0061":"x"})",
                            "{\"\xF0\x9F\x98\x80\":\"x\"}"})
      EXPECT_FALSE(matches(g, bad)) << bad;
    for (const char* ok : {R"({"\u0062":"x"})", R"({"\u0061b":"x"})", R"({"\ud83d":"x"})", R"({"\ud83d\ude01":"x"})",
                           R"({"\u00e8":"x"})", R"({"\u00C9":"x"})", "{\"\xF0\x9F\x98\x81\":\"x\"}",
                           "{\"\xF0\x9F\x98\x80x\":\"x\"}", R"({"\ud83d\ude00x":"x"})", R"({"\u0041":"x"})",
                           R"({"\/\/":"x"})", R"({"q":"x"})", R"({"q\"\"":"x"})", R"({"":"x"})", R"({"a":1})"})
      EXPECT_TRUE(matches(g, ok)) << ok;
  }
  // A pattern key may not match a declared name either, however the regex spells it ("\u000a").
  EXPECT_NE(schema_error({{"type", "object"}, {"properties", {{"\n", {{"type", "integer"}}}}},
                          {"additionalProperties", false}, {"patternProperties", {{"^\\n$", {{"type", "string"}}}}}})
                .find("declared property"),
            std::string::npos);
}

// minLength / maxLength count as jsonschema does after json.loads: an escaped surrogate pair is
// one character, and so is a lone surrogate escape (never a pair split into two).
TEST(JsonSchema, LengthCountsCodePoints) {
  const Grammar one = compile_gbnf(json_schema_to_gbnf({{"type", "string"}, {"minLength", 1}, {"maxLength", 1}}));
  EXPECT_TRUE(matches(one, R"("\ud83d\ude00")"));
  EXPECT_TRUE(matches(one, R"("\uD83D\uDE00")"));
  EXPECT_TRUE(matches(one, "\"\xF0\x9F\x98\x80\""));
  EXPECT_TRUE(matches(one, R"("\u00e9")"));
  EXPECT_FALSE(matches(one, R"("\ud83d\ude00\ud83d\ude00")"));
  EXPECT_TRUE(matches(one, R"("\ud83d")"));
  EXPECT_TRUE(matches(one, R"("\udE00")"));
  EXPECT_FALSE(matches(one, R"("\ud83d\ud83d")"));
  const Grammar two = compile_gbnf(json_schema_to_gbnf({{"type", "string"}, {"minLength", 2}}));
  EXPECT_FALSE(matches(two, R"("\ud83d\ude00")"));
  EXPECT_TRUE(matches(two, R"("\ude00\ud83d")"));
  EXPECT_TRUE(matches(two, R"("\ud83d\ude00x")"));
  EXPECT_TRUE(matches(two, R"("\n\u0041")"));
}

TEST(JsonSchema, AllOfKeywordsAreNeverDropped) {
  // `items` of one schema binds the prefix items of another too: refused, not loosened.
  EXPECT_NE(schema_error({{"allOf", {{{"type", "array"}, {"prefixItems", {{{"type", "string"}}}}},
                                     {{"items", {{"type", "integer"}}}}}}})
                .find("'prefixItems'"),
            std::string::npos);
  // Keywords beside allOf apply with it.
  const Grammar g = compile_gbnf(json_schema_to_gbnf({{"type", "string"}, {"allOf", {{{"minLength", 2}}}}}));
  EXPECT_TRUE(matches(g, "\"ab\""));
  EXPECT_FALSE(matches(g, "\"a\""));
  EXPECT_FALSE(matches(g, "12"));
}

TEST(Regex, CommonSubset) {
  const Grammar g = compile_gbnf(regex_grammar(R"(^(\+\d{1,3} )?\(?\d{3}\)?[-. ]?\d{4}$)"));
  EXPECT_TRUE(matches(g, "+44 (555)-1234"));
  EXPECT_TRUE(matches(g, "5551234"));
  EXPECT_FALSE(matches(g, "555-12345"));
  const Grammar w = compile_gbnf(regex_grammar(R"((?:cat|dog)s?\s\w+[^a-c]\.)"));
  EXPECT_TRUE(matches(w, "dogs x_1d."));
  EXPECT_FALSE(matches(w, "cat xa."));
  EXPECT_FALSE(matches(w, "cow x."));
  const Grammar u = compile_gbnf(regex_grammar("[\\u00e0-\\u00ff]+|z.?"));
  EXPECT_TRUE(matches(u, "\xC3\xA9\xC3\xA0"));
  EXPECT_TRUE(matches(u, "z\xE2\x82\xAC"));
  EXPECT_FALSE(matches(u, "z\n"));
}

TEST(Regex, UnsupportedConstructsAreNamed) {
  EXPECT_NE(regex_error(R"((a)\1)").find("backreferences"), std::string::npos);
  EXPECT_NE(regex_error("(?=a)b").find("lookaround"), std::string::npos);
  EXPECT_NE(regex_error("a\\bb").find("assertion"), std::string::npos);
  EXPECT_NE(regex_error("(ab").find("missing ')'"), std::string::npos);
  EXPECT_NE(regex_error("ab)").find("unbalanced"), std::string::npos);
  EXPECT_NE(regex_error("*a").find("nothing to repeat"), std::string::npos);
  EXPECT_NE(regex_error("[z-a]").find("reversed"), std::string::npos);
  EXPECT_NE(regex_error("a{3,1}").find("reversed"), std::string::npos);
}

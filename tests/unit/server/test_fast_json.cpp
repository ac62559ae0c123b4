// parse_json_fast against nlohmann::json::parse: the same value (types included) wherever the
// fast parser answers, and no answer for anything nlohmann rejects.
#include <gtest/gtest.h>

#include <random>

#include "server/fast_json.h"

using namespace lite_llama::server;
using json = nlohmann::json;

namespace {

bool same(const json& a, const json& b) {
  if (a.type() != b.type()) return false;
  if (a.is_object()) {
    if (a.size() != b.size()) return false;
    for (auto it = a.begin(); it != a.end(); ++it)
      if (!b.contains(it.key()) || !same(it.value(), b[it.key()])) return false;
    return true;
  }
  if (a.is_array()) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
      if (!same(a[i], b[i])) return false;
    return true;
  }
  if (a.is_number_float()) return std::signbit(a.get<double>()) == std::signbit(b.get<double>()) && a == b;
  return a == b;
}

// Fast answers, and equals nlohmann's value.
void expect_same(const std::string& text) {
  const std::optional<json> fast = parse_json_fast(text, 32);
  ASSERT_TRUE(fast) << text;
  EXPECT_TRUE(same(*fast, json::parse(text))) << text << "\nfast: " << fast->dump();
}

// Fast leaves it to nlohmann; `valid` says whether nlohmann accepts it.
void expect_left(const std::string& text, bool valid) {
  EXPECT_FALSE(parse_json_fast(text, 32)) << text;
  EXPECT_EQ(json::accept(text), valid) << text;
}

}  // namespace

TEST(FastJson, SameValues) {
  for (const char* t :
       {R"({})", R"([])", R"("")", "0", "-0", "-0.0", "1.5e3", "1E-2", "-12", "true", "false", "null",
        " \t\r\n{ \"a\" : [ 1 , 2.0 , -3 , \"x\" ] } \n",
        R"({"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":5,"stream":true})",
        R"("a\"b\\c\/d\b\f\n\r\t")", R"("\u0000\u00e9\u20AC\ud83d\ude00")",
        "\"\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80\x7F\"",
        "18446744073709551615", "18446744073709551616", "-9223372036854775808", "-9223372036854775809",
        "123456789012345678901234567890", "0.1", "2.2250738585072014e-308", "1.7976931348623157e308",
        R"({"b":1,"a":{"c":[[[]]],"d":{}}})",
        R"(["12345678","1234567\"","123456\\\\","abcdefghijklmnop\n"])"})
    expect_same(t);
}

TEST(FastJson, LongStrings) {
  std::string s(10000, 'w');
  for (size_t i = 7; i < s.size(); i += 97) s[i] = ' ';
  expect_same("{\"content\":\"" + s + "\"}");
  for (const char* mid : {"\\n", "\\\"", "\xC3\xA9", "\\u00e9", "\xF0\x9F\x98\x80"})
    for (size_t at : {0, 1, 7, 8, 9, 15, 16, 4999}) {
      std::string t = s;
      t.insert(at, mid);
      expect_same("[\"" + t + "\"]");
    }
}

TEST(FastJson, InvalidLeftToNlohmann) {
  for (const char* t :
       {"", " ", "{", "}", "[1,]", "{\"a\":1,}", "{\"a\"}", "{\"a\" 1}", "{a:1}", "[1 2]", "01", "1.",
        ".5", "1e", "1e+", "-", "+1", "--1", "tru", "truex", "nul", "NaN", "Infinity", "[1]x", "\"abc",
        "\"\\x\"", "\"\\u12\"", "\"\\u12g4\"", "\"\\ud800\"", "\"\\udc00\"", "\"\\ud800\\u0041\"",
        "\"a\tb\"", "\"\x01\"", "\"\xC0\xAF\"", "\"\xE0\x80\xAF\"", "\"\xED\xA0\x80\"", "\"\xF4\x90\x80\x80\"",
        "\"\xC3\"", "\"\xFF\"", "\"\x80\"", "/* c */ 1", "[1] // c", "1e400", "-1e400"})
    expect_left(t, false);
}

TEST(FastJson, ValidLeftToNlohmann) {
  expect_left(R"({"a":1,"a":2})", true);           // duplicate keys: nlohmann keeps the last
  expect_left("\xEF\xBB\xBF{}", true);             // a byte-order mark
  expect_left("1e-400", true);                     // underflows to zero
  expect_left(std::string(33, '[') + std::string(33, ']'), true);  // deeper than 32
  EXPECT_TRUE(parse_json_fast(std::string(32, '[') + std::string(32, ']'), 32));
  EXPECT_FALSE(parse_json_fast(std::string(3, '{'), 2));
}

// Random mutations of a request body: whatever the fast parser accepts, nlohmann reads the same.
TEST(FastJson, RandomMutations) {
  const std::string seed =
      R"({"model":"m","messages":[{"role":"system","content":"long \u00e9 text \"q\" \\ )"
      "\xE2\x82\xAC"
      R"( words"},{"role":"user","content":"x"}],"n":1,"t":-0.5e1,"a":[true,false,null,{}]})";
  const std::string alphabet = "{}[]\",:\\ u0123456789abcdefnrtlse.-+E\x7F\x80\xC3\xA9\xED\xF0\t\n";
  std::mt19937 rng(7);
  int accepted = 0;
  for (int i = 0; i < 20000; ++i) {
    std::string t = seed;
    for (int k = 1 + int(rng() % 3); k > 0; --k) {
      const size_t at = rng() % (t.size() + 1);
      const char c = alphabet[rng() % alphabet.size()];
      switch (rng() % 3) {
        case 0: t.insert(t.begin() + long(at), c); break;
        case 1: if (at < t.size()) t.erase(at, 1); break;
        default: if (at < t.size()) t[at] = c;
      }
    }
    const std::optional<json> fast = parse_json_fast(t, 32);
    if (!fast) continue;
    ++accepted;
    const json ref = json::parse(t, nullptr, false);
    ASSERT_FALSE(ref.is_discarded()) << t;
    ASSERT_TRUE(same(*fast, ref)) << t;
  }
  EXPECT_GT(accepted, 1000);
}

// Tool-call formats (server/tool_formats.h) against the real chat templates in
// tests/fixtures/chat_templates: the format is picked from how a template writes a call, the
// text the template writes for a call parses back into it and is accepted by the grammar that
// `required` decodes under. Mistral's format, whose template is not among the fixtures, is
// checked against the text its templates write ([TOOL_CALLS] [{"name": ..., "arguments": ...}]).
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "grammar/gbnf_parser.h"
#include "grammar/matcher.h"
#include "server/chat_output.h"
#include "server/tool_formats.h"
#include "template/chat_template.h"

using namespace lite_llama;
using namespace lite_llama::server;
using ojson = nlohmann::ordered_json;

namespace {

std::string read_template(const std::string& name) {
  std::ifstream f(std::string(LL_SOURCE_DIR) + "/tests/fixtures/chat_templates/" + name + ".jinja");
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

const ojson kTools = ojson::parse(R"([
  {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
    "properties": {"city": {"type": "string"}, "days": {"type": "integer", "minimum": 1, "maximum": 7}},
    "required": ["city"], "additionalProperties": false}}},
  {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object", "properties": {}}}}])");

ProbeRender renderer(const ChatTemplate& t) {
  return [&t](const std::vector<ChatMessage>& m, const std::string& extra) {
    return apply_chat_template(t, m, true, "<|begin_of_text|>", "<|eot_id|>", ojson::parse(extra));
  };
}

// The text a template writes for an assistant turn holding `call`, without the turn's markers.
std::string call_text(const ChatTemplate& t, const std::string& call, const std::string& end) {
  const std::vector<ChatMessage> ask = {{"user", "Weather in Paris?", "", "", ""}};
  std::vector<ChatMessage> with = ask;
  with.push_back({"assistant", "", "", call, ""});
  const ojson extra = {{"tools", kTools}, {"date_string", "01 Jan 2025"}};
  const std::string before = apply_chat_template(t, ask, true, "<|begin_of_text|>", "<|eot_id|>", extra);
  const std::string after = apply_chat_template(t, with, false, "<|begin_of_text|>", "<|eot_id|>", extra);
  EXPECT_EQ(after.substr(0, before.size()), before);
  std::string text = after.substr(before.size());
  text = text.substr(0, text.rfind(end));
  while (!text.empty() && std::isspace(uint8_t(text.back()))) text.pop_back();
  const size_t think = text.find("</think>");  // Qwen3's empty thinking block before the answer
  if (think != std::string::npos) text = text.substr(text.find_first_not_of("\n", think + 8));
  return text;
}

bool grammar_accepts(const std::string& gbnf, const std::string& text) {
  const grammar::Grammar g = grammar::compile_gbnf(gbnf);  // the matcher keeps a reference
  grammar::Matcher m(g);
  return m.accept_bytes(text) && m.can_end();
}

std::vector<ToolCall> parse_streamed(ToolFormat f, const std::string& text, size_t step, std::string& content) {
  ChatOutputParser p(false, false, true, f, {"get_weather", "get_time"});
  content.clear();
  for (size_t i = 0; i < text.size(); i += step) content += p.push(text.substr(i, step)).content;
  content += p.finish().content;
  return p.tool_calls();
}

const char* kCall = R"([{"id": "abcdefghi", "type": "function", "function": {"name": "get_weather",
                       "arguments": "{\"city\": \"Paris\", \"days\": 3}"}}])";

}  // namespace

TEST(ToolFormats, PickedFromTheTemplate) {
  struct Case {
    const char* file;
    ToolFormat want;
  };
  for (const Case c : {Case{"llama3.1", ToolFormat::Llama3Json}, Case{"llama3.2", ToolFormat::Llama3Json},
                       Case{"qwen2.5", ToolFormat::Hermes}, Case{"qwen3", ToolFormat::Hermes},
                       Case{"smollm2", ToolFormat::Hermes}}) {
    const ChatTemplate t(read_template(c.file));
    EXPECT_EQ(detect_tool_format(renderer(t)), c.want) << c.file;
  }
  // Mistral's templates write [TOOL_CALLS] before the list of calls.
  const ChatTemplate mistral(
      "{% for m in messages %}{% if m.tool_calls %}[TOOL_CALLS] {{ m.tool_calls | map(attribute='function') | list | tojson }}"
      "{% else %}[INST] {{ m.content }} [/INST]{% endif %}{% endfor %}");
  EXPECT_EQ(detect_tool_format(renderer(mistral)), ToolFormat::Mistral);
  // A template that fails on tools falls back to the server's own prompt (Hermes).
  const ChatTemplate failing("{% if tools %}{{ raise_exception('no tools') }}{% endif %}x");
  EXPECT_EQ(detect_tool_format(renderer(failing)), ToolFormat::Hermes);
}

TEST(ToolFormats, TemplateCallTextParsesBackAndFitsTheGrammar) {
  struct Case {
    const char* file;
    ToolFormat format;
    const char* end;
  };
  for (const Case c : {Case{"llama3.1", ToolFormat::Llama3Json, "<|eot_id|>"},
                       Case{"llama3.2", ToolFormat::Llama3Json, "<|eot_id|>"},
                       Case{"qwen2.5", ToolFormat::Hermes, "<|im_end|>"},
                       Case{"qwen3", ToolFormat::Hermes, "<|im_end|>"}}) {
    SCOPED_TRACE(c.file);
    const ChatTemplate t(read_template(c.file));
    const std::string text = call_text(t, kCall, c.end);
    for (size_t step : {1, 3, 1000}) {
      std::string content;
      const auto calls = parse_streamed(c.format, text, step, content);
      EXPECT_EQ(content, "") << text;
      ASSERT_EQ(calls.size(), 1u) << text;
      EXPECT_EQ(calls[0].name, "get_weather");
      EXPECT_EQ(calls[0].arguments, R"({"city":"Paris","days":3})");
    }
    EXPECT_TRUE(grammar_accepts(tool_calls_grammar(c.format, kTools, "", false), text)) << text;
    EXPECT_TRUE(grammar_accepts(tool_calls_grammar(c.format, kTools, "get_weather", true), text)) << text;
    EXPECT_FALSE(grammar_accepts(tool_calls_grammar(c.format, kTools, "get_time", true), text)) << text;
  }
}

TEST(ToolFormats, MistralCalls) {
  const std::string two =
      R"([{"name": "get_weather", "arguments": {"city": "Paris"}}, {"name": "get_time", "arguments": {}}])";
  for (const std::string text : {two, " " + two, "[TOOL_CALLS] " + two}) {
    for (size_t step : {1, 4, 1000}) {
      std::string content;
      const auto calls = parse_streamed(ToolFormat::Mistral, text, step, content);
      EXPECT_EQ(content, "") << text;
      ASSERT_EQ(calls.size(), 2u) << text;
      EXPECT_EQ(calls[0].arguments, R"({"city":"Paris"})");
      EXPECT_EQ(calls[1].name, "get_time");
      for (const auto& c : calls) {  // Mistral's templates require 9 letters or digits
        EXPECT_EQ(c.id.size(), 9u);
        for (char ch : c.id) EXPECT_TRUE(std::isalnum(uint8_t(ch))) << c.id;
      }
    }
  }
  // Cut by max_tokens after whole calls: they are kept; text that cannot continue a list is not.
  const std::string first = R"([{"name": "get_weather", "arguments": {"city": "Paris"}})";
  for (const std::string tail : {"", ",", ", ", R"(, {"name": "get_ti)"}) {
    std::string content;
    const auto calls = parse_streamed(ToolFormat::Mistral, first + tail, 3, content);
    EXPECT_EQ(content, "") << tail;
    ASSERT_EQ(calls.size(), 1u) << tail;
    EXPECT_EQ(calls[0].name, "get_weather");
  }
  for (const std::string tail : {", hello", "] and more", R"(, {"name": "nope", "arguments": {}})"}) {
    std::string content;
    EXPECT_TRUE(parse_streamed(ToolFormat::Mistral, first + tail, 3, content).empty()) << tail;
    EXPECT_EQ(content, first + tail);
  }
  EXPECT_TRUE(grammar_accepts(tool_calls_grammar(ToolFormat::Mistral, kTools, "", true), two));
  EXPECT_FALSE(grammar_accepts(tool_calls_grammar(ToolFormat::Mistral, kTools, "", false), two));
  EXPECT_TRUE(grammar_accepts(tool_calls_grammar(ToolFormat::Mistral, kTools, "get_time", false),
                              R"([{"name": "get_time", "arguments": {}}])"));
}

TEST(ToolFormats, TextThatIsNoCallStaysContent) {
  for (const auto& [f, text] : std::vector<std::pair<ToolFormat, std::string>>{
           {ToolFormat::Llama3Json, "The weather is fine."},
           {ToolFormat::Llama3Json, R"({"name": "undeclared", "parameters": {}})"},
           {ToolFormat::Llama3Json, R"({"city": "Paris"})"},
           {ToolFormat::Llama3Json, R"({"name": "get_time", "parameters": {}} and more)"},
           {ToolFormat::Llama3Json, R"({"name": "get_time", "parameters": )"},
           {ToolFormat::Mistral, "[1, 2, 3]"},
           {ToolFormat::Mistral, "[Note] it rains"},
           {ToolFormat::Mistral, R"([{"name": "get_time", "arguments": 5}])"},
           {ToolFormat::Hermes, "<tool_call>{\"name\": \"get_time\", \"arguments\": [1]}</tool_call>"}}) {
    for (size_t step : {1, 5, 1000}) {
      std::string content;
      const auto calls = parse_streamed(f, text, step, content);
      EXPECT_TRUE(calls.empty()) << text;
      EXPECT_EQ(content, text) << step;
    }
  }
  // Llama 3: several calls separated by ';', <|python_tag|> optional.
  std::string content;
  const auto calls = parse_streamed(
      ToolFormat::Llama3Json,
      R"(<|python_tag|>{"name": "get_time", "parameters": {}}; {"name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"})", 2,
      content);
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[1].arguments, R"({"city":"Oslo"})");
  EXPECT_EQ(calls[0].id.rfind("call_", 0), 0u);
}

// A Hermes answer cut by max_tokens inside a later call: the whole calls before it are the
// answer and no markup is left in the content; a cut inside the only call stays content.
TEST(ToolFormats, HermesCallsBeforeACutOneAreKept) {
  const std::string one = "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>";
  const std::string cut = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"ci";
  for (size_t step : {1, 7, 1000}) {
    std::string content;
    const auto calls = parse_streamed(ToolFormat::Hermes, one + "\n" + one + "\n" + cut, step, content);
    EXPECT_EQ(content, "") << step;
    ASSERT_EQ(calls.size(), 2u) << step;
    EXPECT_EQ(calls[1].name, "get_time");
    const auto alone = parse_streamed(ToolFormat::Hermes, cut, step, content);
    EXPECT_TRUE(alone.empty());
    EXPECT_EQ(content, cut) << step;
    // Cut inside the next call's opening tag, or inside a whole call's closing tag: every call
    // before the cut is kept (the opening tag cut lost them all: the parse failed on "<tool").
    const std::string whole = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n";
    for (const std::string& tail : {std::string("<tool"), std::string("<"), whole + "</tool", whole})
      for (const std::string& first : {one + "\n", one}) {
        const auto kept = parse_streamed(ToolFormat::Hermes, first + tail, step, content);
        EXPECT_EQ(content, "") << step << " " << tail;
        const size_t want = tail.starts_with("<tool_call>") ? 2 : 1;
        ASSERT_EQ(kept.size(), want) << step << " " << tail;
        EXPECT_EQ(kept[0].name, "get_time");
        if (want == 2) EXPECT_EQ(kept[1].name, "get_weather");
      }
  }
}

// "parameters": {} is a function without parameters: the forced call's arguments must be an
// object, as OpenAI's are and as the parser takes them (a string or number was a grammar-valid
// call that parsed to no call, and `required` returned none).
TEST(ToolFormats, EmptyParametersSchemaForcesObjectArguments) {
  const ojson tools = ojson::parse(R"([{"type": "function", "function": {"name": "noargs", "parameters": {}}}])");
  for (ToolFormat f : {ToolFormat::Hermes, ToolFormat::Llama3Json, ToolFormat::Mistral}) {
    const std::string g = tool_calls_grammar(f, tools, "", false);
    const char* key = f == ToolFormat::Llama3Json ? "parameters" : "arguments";
    auto call = [&](const std::string& args) {
      std::string c = std::string("{\"name\": \"noargs\", \"") + key + "\": " + args + "}";
      if (f == ToolFormat::Hermes) return "<tool_call>\n" + c + "\n</tool_call>";
      if (f == ToolFormat::Mistral) return "[" + c + "]";
      return c;
    };
    for (const std::string args : {"\"x\"", "5", "[1]", "null"})
      EXPECT_FALSE(grammar_accepts(g, call(args))) << tool_format_name(f) << " " << args;
    EXPECT_TRUE(grammar_accepts(g, call(R"({"a": 1})"))) << tool_format_name(f);
    const auto calls = parse_tool_calls(f, call("{}"), {"noargs"});
    ASSERT_TRUE(calls.has_value());
    EXPECT_EQ((*calls)[0].arguments, "{}");
  }
}

// Random answers built from the pieces of calls, cut anywhere: parsing never throws or reads past
// the text, and every call it keeps names a declared tool (Mistral) with object arguments.
TEST(ToolFormats, RandomCutAnswersParseSafely) {
  const std::vector<std::string> pieces = {"<tool_call>", "</tool_call>", "<tool", "</tool", "\n", " ", "[", "]",
                                           "{", "}", ",", ":", "\"name\"", "\"arguments\"", "\"get_time\"",
                                           "\"get_weather\"", "{}", "\"city\"", "\"Pa", "ris\"", "[TOOL_CALLS]", "x"};
  uint64_t s = 12345;
  auto next = [&] { return (s = s * 6364136223846793005ull + 1442695040888963407ull) >> 33; };
  for (int trial = 0; trial < 3000; ++trial) {
    std::string text;
    const int n = int(next() % 24);
    for (int k = 0; k < n; ++k) text += pieces[next() % pieces.size()];
    for (ToolFormat f : {ToolFormat::Hermes, ToolFormat::Mistral, ToolFormat::Llama3Json}) {
      std::string content;
      for (const ToolCall& c : parse_streamed(f, text, 1 + next() % 8, content)) {
        EXPECT_TRUE(c.name == "get_time" || c.name == "get_weather" || f == ToolFormat::Hermes) << text;
        EXPECT_EQ(c.arguments.front(), '{') << text;
      }
    }
  }
}

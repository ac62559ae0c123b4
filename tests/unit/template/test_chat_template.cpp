// Golden tests: every case of tests/fixtures/chat_templates/cases.json (rendered by transformers'
// own apply_chat_template machinery, see scripts/fixtures/make_chat_template_fixtures.py) must
// render byte for byte the same with the C++ engine, or fail with the same raise_exception text.
#include <gtest/gtest.h>

#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "io/gguf.h"
#include "template/chat_template.h"

using namespace lite_llama;
using nlohmann::ordered_json;

namespace {

const std::string kDir = std::string(LL_SOURCE_DIR) + "/tests/fixtures/chat_templates/";

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct Case {
  std::string name;
  ordered_json json;
};

std::vector<Case> load_cases() {
  std::vector<Case> cases;
  ordered_json all = ordered_json::parse(read_file(kDir + "cases.json"));
  for (const auto& c : all.at("cases")) cases.push_back({c.at("name").get<std::string>(), c});
  return cases;
}

std::string today() {
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  char buf[64];
  return std::string(buf, std::strftime(buf, sizeof buf, "%d %b %Y", &tm));
}

ChatMessage msg(std::string role, std::string content, std::string reasoning = {}) {
  ChatMessage m;
  m.role = std::move(role);
  m.content = std::move(content);
  m.reasoning_content = std::move(reasoning);
  return m;
}

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  for (size_t pos = s.find(from); pos != std::string::npos; pos = s.find(from, pos + to.size()))
    s.replace(pos, from.size(), to);
  return s;
}

class ChatTemplateGolden : public ::testing::TestWithParam<Case> {};

TEST_P(ChatTemplateGolden, RendersLikeTransformers) {
  const ordered_json& c = GetParam().json;
  std::string source = c.contains("source") ? c.at("source").get<std::string>()
                                            : read_file(kDir + c.at("template").get<std::string>());
  ChatTemplate tpl(source);
  const ordered_json& context = c.at("context");
  if (c.contains("error")) {
    try {
      tpl.render(context);
      FAIL() << "expected an error: " << c.at("error").get<std::string>();
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(c.at("error").get<std::string>()), std::string::npos)
          << e.what();
    }
    return;
  }
  std::string expected = c.at("expected").get<std::string>();
  // Cases rendered through strftime_now carry the generation day; the engine renders today.
  if (c.contains("today"))
    expected = replace_all(expected, c.at("today").get<std::string>(), today());
  EXPECT_EQ(tpl.render(context), expected);
}

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  std::string n = info.param.name;
  for (char& ch : n)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return n;
}

INSTANTIATE_TEST_SUITE_P(Fixtures, ChatTemplateGolden, ::testing::ValuesIn(load_cases()),
                         case_name);

TEST(ChatTemplateFixtures, CoverEveryFamily) {
  std::vector<Case> cases = load_cases();
  for (const char* family :
       {"smollm2/", "qwen2.5/", "qwen3/", "llama3.1/", "llama3.2/", "engine/"}) {
    size_t n = 0;
    for (const auto& c : cases) n += c.name.rfind(family, 0) == 0;
    EXPECT_GE(n, 5u) << family;
  }
}

// The fixture copy of SmolLM2's template is the one its GGUF ships.
TEST(ChatTemplateFixtures, SmolLm2MatchesGguf) {
  std::string model = std::string(LL_SOURCE_DIR) + "/models/SmolLM2-135M-Instruct.Q4_1.gguf";
  if (!std::filesystem::exists(model)) GTEST_SKIP() << "run scripts/fetch-model first";
  auto f = gguf::File::open(model);
  std::string from_gguf = f->get_string("tokenizer.chat_template", "");
  EXPECT_EQ(from_gguf, read_file(kDir + "smollm2.jinja"));
  ChatTemplate tpl(from_gguf);
  EXPECT_EQ(apply_chat_template(tpl, {msg("user", "Hi")}, true, "<|im_start|>", "<|im_end|>"),
            "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
            "Face<|im_end|>\n"
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
}

TEST(ChatTemplateFixtures, ApplyChatTemplateMatchesContextRendering) {
  ChatTemplate qwen3(read_file(kDir + "qwen3.jinja"));
  std::vector<ChatMessage> msgs = {msg("system", "S"), msg("user", "U")};
  EXPECT_EQ(
      apply_chat_template(qwen3, msgs, true, "", "<|im_end|>", {{"enable_thinking", false}}),
      "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n<|im_start|>assistant\n"
      "<think>\n\n</think>\n\n");
  ChatTemplate llama(read_file(kDir + "llama3.1.jinja"));
  EXPECT_EQ(apply_chat_template(llama, {msg("user", " Hi ")}, false, "<|begin_of_text|>",
                                "<|eot_id|>", {{"date_string", "01 Feb 2025"}}),
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge "
            "Date: December 2023\n"
            "Today Date: 01 Feb "
            "2025\n\n<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>");
  // Reasoning of the last assistant turn after the last user query is kept by Qwen3's template.
  std::vector<ChatMessage> turns = {msg("user", "Q"), msg("assistant", "A", "R")};
  EXPECT_EQ(apply_chat_template(qwen3, turns, false, "", "<|im_end|>"),
            "<|im_start|>user\nQ<|im_end|>\n<|im_start|>assistant\n<think>\nR\n</"
            "think>\n\nA<|im_end|>\n");
}

}  // namespace

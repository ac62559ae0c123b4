// The engine's chat templates: a template given per call (LLM.chat(chat_template=...)) or for the
// whole engine (--chat-template) renders with the engine's own bos_token / eos_token, and a source
// is parsed once, not for every conversation.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "common/default_model.h"
#include "core/error.h"
#include "engine/chat_prompt.h"
#include "lite_llama/engine.h"

using namespace lite_llama;

namespace {

const std::vector<ChatMessage> kChat = {{"user", "hi", "", "", ""}};

// The message of the lite_llama::Error fn throws, or "no error".
template <typename F>
std::string error_of(F&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

EngineOptions dummy_options() {  // random weights and the byte tokenizer: no template of its own
  EngineOptions o;
  o.model = LL_SOURCE_DIR "/tests/fixtures/models/llama/config.json";
  o.load_format = "dummy";
  o.backend.device = DeviceKind::Cpu;
  o.backend.threads = 2;
  o.ctx = 64;
  return o;
}

}  // namespace

TEST(ChatTemplates, SourcesRenderWithTheModelsTokensAndParseOnce) {
  const ChatTemplates t("{{ bos_token }}model:{{ messages[0].content }}", "", "m.gguf", "<s>", "</s>");
  auto render = [&](const std::string& src) { return t.render(kChat, true, "", false, src); };
  EXPECT_EQ(render(""), "<s>model:hi");
  EXPECT_EQ(render("A{{ eos_token }}"), "A</s>");
  EXPECT_EQ(render("B{{ bos_token }}{{ messages[0].content }}"), "B<s>hi");
  EXPECT_EQ(t.parses(), 3);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(render("A{{ eos_token }}"), "A</s>");
    EXPECT_EQ(render(""), "<s>model:hi");
    EXPECT_EQ(render("{{ bos_token }}model:{{ messages[0].content }}"), "<s>model:hi");  // the default's text
  }
  EXPECT_EQ(t.parses(), 3);
  // Past kKept sources the least recently used is parsed again; the others stay.
  for (size_t i = 0; i < ChatTemplates::kKept; ++i) EXPECT_EQ(render(std::to_string(i)), std::to_string(i));
  EXPECT_EQ(t.parses(), 3 + int(ChatTemplates::kKept));
  EXPECT_EQ(render(std::to_string(ChatTemplates::kKept - 1)), std::to_string(ChatTemplates::kKept - 1));
  EXPECT_EQ(render("A{{ eos_token }}"), "A</s>");
  EXPECT_EQ(t.parses(), 4 + int(ChatTemplates::kKept));
  // Variables and continue_final as for the model's template.
  EXPECT_EQ(t.render(kChat, true, R"({"x": 7})", false, "{{ x }}"), "7");
  EXPECT_NE(error_of([&] { render("{% if %}"); }).find("chat template line 1"), std::string::npos);
}

TEST(ChatTemplates, OverrideReplacesTheModelsAndABrokenOneFailsAtOnce) {
  const ChatTemplates t("model", "override{{ eos_token }}", "m.gguf", "<s>", "</s>");
  EXPECT_EQ(t.parses(), 1);  // parsed at construction
  EXPECT_EQ(t.render(kChat, true, "", false, ""), "override</s>");
  EXPECT_EQ(t.render(kChat, true, "", false, "model"), "model");  // a per-call source still wins
  const std::string e = error_of([] { ChatTemplates("model", "{% for m in messages %}\nx", "m", "", ""); });
  EXPECT_TRUE(e.starts_with("--chat-template: the template does not parse: ")) << e;
  EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  const ChatTemplates none("", "", "m.gguf", "", "");
  EXPECT_EQ(error_of([&] { none.render(kChat, true, "", false, ""); }),
            "m.gguf: the model has no chat template (--chat-template gives one)");
  EXPECT_EQ(none.render(kChat, true, "", false, "given"), "given");
}

TEST(ChatTemplates, ThreadsShareTheKeptTemplates) {
  const ChatTemplates t("", "", "m", "<s>", "</s>");
  std::vector<std::thread> threads;
  std::atomic<int> wrong{0};
  for (int k = 0; k < 8; ++k)
    threads.emplace_back([&, k] {
      for (int i = 0; i < 300; ++i) {
        const int s = (i + k) % 6;  // more sources than are kept: evictions while others render
        const std::string src = "{{ bos_token }}" + std::to_string(s) + "{{ messages[0].content }}";
        if (t.render(kChat, true, "", false, src) != "<s>" + std::to_string(s) + "hi") ++wrong;
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(wrong, 0);
}

TEST(EngineChatTemplate, OptionGivesATemplateToAModelWithoutOne) {
  EngineOptions o = dummy_options();
  auto plain = Engine::create(o);
  EXPECT_NE(error_of([&] { plain->apply_chat_template(kChat, true); }).find("has no chat template"),
            std::string::npos);
  o.chat_template = "{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}{% if add_generation_prompt %}>{% endif %}";
  auto e = Engine::create(o);
  EXPECT_EQ(e->apply_chat_template(kChat, true), "<user>hi>");
  std::string text;
  EXPECT_EQ(e->tokenize_chat(kChat, false, "", false, &text), e->tokenize("<user>hi", false, true));
  EXPECT_EQ(text, "<user>hi");
  // Per call: another source, then the engine's again.
  EXPECT_EQ(e->apply_chat_template(kChat, true, "", false, "[{{ messages[0].content }}]"), "[hi]");
  e->tokenize_chat(kChat, true, "", false, &text, false, "({{ messages[0].content }})");
  EXPECT_EQ(text, "(hi)");
  EXPECT_EQ(e->apply_chat_template(kChat, false), "<user>hi");
}

TEST(EngineChatTemplate, BrokenOptionFailsCreateOnOneLine) {
  EngineOptions o = dummy_options();
  o.chat_template = "{{ messages[0].content\n";
  const std::string e = error_of([&] { Engine::create(o); });
  EXPECT_TRUE(e.starts_with("--chat-template: the template does not parse: chat template line 1")) << e;
  EXPECT_EQ(e.find('\n'), std::string::npos) << e;
}

// The per-call template gets the model's bos/eos text from the engine (the Python module rebuilt
// them from special-token ids before).
TEST(EngineChatTemplate, PerCallSourceUsesTheModelsBosText) {
  LL_REQUIRE_DEFAULT_MODEL();
  EngineOptions o;
  o.model = lite_llama::testing::default_model_path();
  o.backend.threads = 2;
  o.ctx = 256;
  o.kv_tokens = 512;
  auto e = Engine::create(o);
  std::string bos;
  for (const auto& [name, id] : e->info().special_tokens)
    if (name == "bos") bos = e->token_text(id);
  ASSERT_FALSE(bos.empty());
  const std::string own = e->apply_chat_template(kChat, true);
  EXPECT_EQ(e->apply_chat_template(kChat, true, "", false, "{{ bos_token }}1"), bos + "1");
  EXPECT_EQ(e->apply_chat_template(kChat, true, "", false, "{{ bos_token }}2"), bos + "2");
  EXPECT_EQ(e->apply_chat_template(kChat, true), own);  // the model's own is untouched
}

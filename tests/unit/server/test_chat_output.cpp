// The chat answer splitter: <think> blocks to reasoning, <tool_call> blocks to tool calls, the
// rest to content, the same however the text is cut into stream deltas.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "server/chat_output.h"

using namespace lite_llama::server;

namespace {

struct Split {
  std::string content, reasoning;
  std::vector<ToolCall> calls;
};

// Feeds `text` in pieces of `step` bytes (0: all at once).
Split run(const std::string& text, size_t step, bool reasoning, bool in_think, bool tools, bool forced_calls = false) {
  ChatOutputParser p(reasoning, in_think, tools, ToolFormat::Hermes, {}, forced_calls);
  Split s;
  auto add = [&](const ChatOutputParser::Delta& d) {
    s.content += d.content;
    s.reasoning += d.reasoning;
  };
  if (step == 0) {
    add(p.push(text));
  } else {
    for (size_t i = 0; i < text.size(); i += step) add(p.push(text.substr(i, step)));
  }
  add(p.finish());
  s.calls = p.tool_calls();
  return s;
}

}  // namespace

TEST(ChatOutput, ThinkBlockGoesToReasoningWhateverTheCuts) {
  const std::string text = "\n<think>\nLet me see: 2 < 3 and </thin is not a tag.\n</think>\n\nThe answer is 4.";
  for (size_t step : {0, 1, 2, 3, 7}) {
    const Split s = run(text, step, true, false, false);
    EXPECT_EQ(s.reasoning, "\nLet me see: 2 < 3 and </thin is not a tag.\n") << step;
    EXPECT_EQ(s.content, "The answer is 4.") << step;
  }
  // Without a think block everything is content; without reasoning on, the tags stay text.
  EXPECT_EQ(run("<thin>x", 1, true, false, false).content, "<thin>x");
  EXPECT_EQ(run("<think>a</think>b", 1, false, false, false).content, "<think>a</think>b");
  // The prompt opened the block: the answer starts inside it.
  const Split opened = run("plan</think>done", 2, true, true, false);
  EXPECT_EQ(opened.reasoning, "plan");
  EXPECT_EQ(opened.content, "done");
  // Cut off while thinking: all of it is reasoning.
  EXPECT_EQ(run("<think>unfinished <", 1, true, false, false).reasoning, "unfinished <");
}

TEST(ChatOutput, ToolCallsAreParsed) {
  const std::string text =
      "Sure.<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 2}}\n</tool_call>\n"
      "<tool_call>{\"name\": \"now\", \"arguments\": {}}</tool_call>";
  for (size_t step : {0, 1, 5}) {
    const Split s = run(text, step, false, false, true);
    EXPECT_EQ(s.content, "Sure.") << step;
    ASSERT_EQ(s.calls.size(), 2u) << step;
    EXPECT_EQ(s.calls[0].name, "get_weather");
    EXPECT_EQ(s.calls[0].arguments, "{\"city\":\"Paris\",\"days\":2}");  // order kept
    EXPECT_EQ(s.calls[1].name, "now");
    EXPECT_EQ(s.calls[1].arguments, "{}");
    EXPECT_NE(s.calls[0].id, s.calls[1].id);
    EXPECT_EQ(s.calls[0].id.rfind("call_", 0), 0u);
  }
  // Reasoning and a call together.
  const Split both = run("<think>need weather</think><tool_call>{\"name\": \"w\", \"arguments\": {\"a\": 1}}</tool_call>", 3,
                         true, false, true);
  EXPECT_EQ(both.reasoning, "need weather");
  EXPECT_EQ(both.content, "");
  ASSERT_EQ(both.calls.size(), 1u);
}

TEST(ChatOutput, BrokenCallsStayContent) {
  for (const std::string text : {"<tool_call>{\"name\": 3}</tool_call>", "<tool_call>not json</tool_call>",
                                 "<tool_call>{\"name\": \"a\"}</tool_call> and then prose"}) {
    const Split s = run(text, 2, false, false, true);
    EXPECT_TRUE(s.calls.empty()) << text;
    EXPECT_EQ(s.content, text);
  }
  // A held-back partial tag is released at the end.
  EXPECT_EQ(run("a <tool_ca", 1, false, false, true).content, "a <tool_ca");
}

// A forced call (tool_choice required or named) that max_tokens or a stop string cut before any
// call was whole: what is left of it is markup, not content. Whole calls before the cut are still
// calls.
TEST(ChatOutput, CutForcedCallIsNotContent) {
  for (const std::string text : {"<tool_", "<tool_call>", "<tool_call>\n{\"name\": \"get_wea",
                                 "<tool_call>{\"name\": \"a\", \"arguments\": {\"x\": 1}}</tool_call>\n<tool_call>{\"na"}) {
    for (size_t step : {0, 1, 4}) {
      const Split s = run(text, step, true, false, true, true);
      EXPECT_EQ(s.content, "") << text << " " << step;
    }
  }
  EXPECT_EQ(run("<think>plan</think><tool_call>{\"na", 3, true, false, true, true).reasoning, "plan");
  const Split kept = run("<tool_call>{\"name\": \"a\", \"arguments\": {}}</tool_call><tool_call>{", 2, false, false, true,
                         true);
  ASSERT_EQ(kept.calls.size(), 1u);
  EXPECT_EQ(kept.calls[0].name, "a");
  // Not cut (or not forced): a broken block stays content, as before.
  EXPECT_EQ(run("<tool_call>{\"na", 1, false, false, true).content, "<tool_call>{\"na");
}

// parallel_tool_calls false: at most one call, the first (as OpenAI; vLLM keeps the first too).
TEST(ChatOutput, NoParallelCallsKeepsTheFirst) {
  const std::string text =
      "<tool_call>{\"name\": \"a\", \"arguments\": {\"x\": 1}}</tool_call>\n"
      "<tool_call>{\"name\": \"b\", \"arguments\": {}}</tool_call>";
  for (size_t step : {1, 1000}) {
    ChatOutputParser p(false, false, true, ToolFormat::Hermes, {}, false, false);
    std::string content;
    for (size_t i = 0; i < text.size(); i += step) content += p.push(text.substr(i, step)).content;
    content += p.finish().content;
    EXPECT_EQ(content, "") << step;
    ASSERT_EQ(p.tool_calls().size(), 1u) << step;
    EXPECT_EQ(p.tool_calls()[0].name, "a");
    EXPECT_EQ(p.tool_calls()[0].arguments, "{\"x\":1}");
  }
}

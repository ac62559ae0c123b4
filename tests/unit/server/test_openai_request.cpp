// The OpenAI request parser and response writers, without engine or HTTP.
#include <gtest/gtest.h>

#include "server/openai_request.h"
#include "server/openai_response.h"
#include "server/sse.h"

using namespace lite_llama;
using namespace lite_llama::server;

namespace {

RequestLimits limits() {
  RequestLimits l;
  l.ctx = 100;
  l.vocab_size = 1000;
  l.model_name = "tiny";
  return l;
}

ApiError parse_error(const std::string& body, Endpoint ep = Endpoint::Completions) {
  try {
    parse_openai_request(body, ep, limits());
  } catch (const ApiError& e) {
    return e;
  }
  ADD_FAILURE() << "no error for " << body;
  return ApiError(0, "");
}

}  // namespace

TEST(OpenAIRequest, CompletionFields) {
  OpenAIRequest r = parse_openai_request(
      R"({"model":"tiny","prompt":"hi","max_tokens":5,"temperature":0,"top_p":0.5,"top_k":-1,
          "min_p":0.1,"stop":"x","seed":3,"n":2,"logprobs":2,"stream":true,
          "stream_options":{"include_usage":true},"ignore_eos":true,"repetition_penalty":1.2})",
      Endpoint::Completions, limits());
  ASSERT_EQ(r.prompts.size(), 1u);
  EXPECT_EQ(r.prompts[0].text, "hi");
  EXPECT_FALSE(r.prompts[0].is_tokens);
  EXPECT_EQ(r.params.max_tokens, 5);
  EXPECT_TRUE(r.max_tokens_given);
  EXPECT_EQ(r.params.temperature, 0.0f);
  EXPECT_EQ(r.params.top_k, 0);
  EXPECT_EQ(r.params.stop, std::vector<std::string>{"x"});
  EXPECT_EQ(r.params.seed, 3u);
  EXPECT_EQ(r.n, 2);
  EXPECT_TRUE(r.logprobs);
  EXPECT_EQ(r.params.top_logprobs, 2);
  EXPECT_TRUE(r.stream && r.include_usage && r.params.ignore_eos);
}

TEST(OpenAIRequest, PromptShapes) {
  auto tokens = [](const std::string& body) {
    const OpenAIRequest r = parse_openai_request(body, Endpoint::Completions, limits());
    EXPECT_EQ(r.prompts.size(), 1u);
    return r.prompts.at(0).tokens;
  };
  EXPECT_EQ(tokens(R"({"prompt":[1,2,3]})"), (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(tokens(R"({"prompt":[[4,5]]})"), (std::vector<int32_t>{4, 5}));
  EXPECT_EQ(parse_openai_request(R"({"prompt":["one"]})", Endpoint::Completions, limits()).prompts.at(0).text,
            "one");
  // A batch: strings or token-id lists, each its own prompt.
  const OpenAIRequest batch = parse_openai_request(R"({"prompt":["a",[4,5],"b"]})", Endpoint::Completions, limits());
  ASSERT_EQ(batch.prompts.size(), 3u);
  EXPECT_EQ(batch.prompts[0].text, "a");
  EXPECT_EQ(batch.prompts[1].tokens, (std::vector<int32_t>{4, 5}));
  EXPECT_EQ(batch.prompts[2].text, "b");
  EXPECT_EQ(parse_error(R"({"prompt":["a",""]})").param, "prompt");
  EXPECT_EQ(parse_error(R"({"prompt":["a",[]]})").param, "prompt");
  EXPECT_EQ(parse_error(R"({"prompt":[1000]})").param, "prompt");
  EXPECT_EQ(tokens(R"({"prompt":[1.0,2]})"), (std::vector<int32_t>{1, 2}));
  // Numbers or booleans in the list make it token ids, not a list of prompts.
  for (const char* body : {R"({"prompt":[1.5,2]})", R"({"prompt":[true,false]})", R"({"prompt":[1,"a"]})",
                           R"({"prompt":[[1.5]]})"}) {
    const ApiError e = parse_error(body);
    EXPECT_EQ(e.param, "prompt");
    EXPECT_NE(std::string(e.what()).find("token ids must be integers"), std::string::npos) << e.what();
  }
  EXPECT_EQ(parse_error(R"({"prompt":""})").param, "prompt");
  EXPECT_EQ(parse_error(R"({})").param, "prompt");
}

TEST(OpenAIRequest, ChatMessages) {
  OpenAIRequest r = parse_openai_request(
      R"({"messages":[{"role":"developer","content":"sys"},
                      {"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]},
                      {"role":"assistant","content":null}],
          "chat_template_kwargs":{"enable_thinking":false},"logprobs":true,"top_logprobs":3,
          "max_completion_tokens":7})",
      Endpoint::Chat, limits());
  ASSERT_EQ(r.messages.size(), 3u);
  EXPECT_EQ(r.messages[0].role, "system");
  EXPECT_EQ(r.messages[1].content, "a\nb");
  EXPECT_EQ(r.messages[2].content, "");
  EXPECT_EQ(r.template_kwargs_json, R"({"enable_thinking":false})");
  EXPECT_EQ(r.params.top_logprobs, 3);
  EXPECT_EQ(r.params.max_tokens, 7);
  EXPECT_EQ(parse_error(R"({"messages":[]})", Endpoint::Chat).param, "messages");
  EXPECT_EQ(parse_error(R"({"messages":[{"role":"tool","content":"x"}]})", Endpoint::Chat).param,
            "messages");
  EXPECT_EQ(parse_error(R"({"messages":[{"role":"user","content":"x"}],"top_logprobs":1})",
                        Endpoint::Chat)
                .param,
            "top_logprobs");
}

TEST(OpenAIRequest, ErrorsNameTheParameter) {
  EXPECT_EQ(parse_error("{oops").code, "invalid_json");
  EXPECT_EQ(parse_error("[1]").status, 400);
  EXPECT_EQ(parse_error(std::string(100, '[')).status, 400);
  const ApiError model = parse_error(R"({"model":"other","prompt":"x"})");
  EXPECT_EQ(model.status, 404);
  EXPECT_EQ(model.code, "model_not_found");
  EXPECT_EQ(parse_error(R"({"prompt":"x","temperature":"hot"})").param, "temperature");
  EXPECT_EQ(parse_error(R"({"prompt":"x","temperature":-1})").param, "temperature");
  EXPECT_EQ(parse_error(R"({"prompt":"x","top_p":1e300})").param, "top_p");
  EXPECT_EQ(parse_error(R"({"prompt":"x","max_tokens":0})").param, "max_tokens");
  EXPECT_EQ(parse_error(R"({"prompt":"x","max_tokens":101})").param, "max_tokens");
  EXPECT_EQ(parse_error(R"({"prompt":"x","max_tokens":1.5})").param, "max_tokens");
  EXPECT_EQ(parse_error(R"({"prompt":"x","n":17})").param, "n");
  EXPECT_EQ(parse_error(R"({"prompt":"x","stop":[""]})").param, "stop");
  EXPECT_TRUE(parse_openai_request(R"({"prompt":"x","echo":true})", Endpoint::Completions, limits()).echo);
  {  // echo with logprobs: the prompt's logprobs are asked of the engine with the same k
    const OpenAIRequest r = parse_openai_request(R"({"prompt":"x","echo":true,"logprobs":3})", Endpoint::Completions, limits());
    EXPECT_TRUE(r.echo && r.logprobs);
    EXPECT_EQ(r.params.prompt_logprobs, 3);
    EXPECT_EQ(parse_openai_request(R"({"prompt":"x","logprobs":3})", Endpoint::Completions, limits()).params.prompt_logprobs, -1);
  }
  for (const char* best_of : {"0", "-1", "1.5", "2", "true"})
    EXPECT_EQ(parse_error(std::string(R"({"prompt":"x","best_of":)") + best_of + "}").param, "best_of") << best_of;
  EXPECT_EQ(parse_openai_request(R"({"prompt":"x","best_of":1})", Endpoint::Completions, limits()).n, 1);
}

// The 404 names the whole model name: what() ends at a NUL byte, the reply's message did too.
TEST(OpenAIRequest, UnknownModelNameKeepsNulBytes) {
  const ApiError e = parse_error(R"({"model":"abc\u0000def","prompt":"x"})");
  EXPECT_EQ(e.status, 404);
  const std::string msg = error_json(e)["error"]["message"].get<std::string>();
  EXPECT_NE(msg.find(std::string("'abc\0def'", 9)), std::string::npos) << msg;
  EXPECT_NE(dump(error_json(e)).find("abc\\u0000def"), std::string::npos);
}

// Without max_tokens, as OpenAI and vLLM: completions 16 (less where the context ends sooner),
// chat the rest of the context.
TEST(OpenAIRequest, MaxTokensDefault) {
  OpenAIRequest r = parse_openai_request(R"({"prompt":"x"})", Endpoint::Completions, limits());
  EXPECT_FALSE(r.max_tokens_given);
  OpenAIRequest near_end = r;
  resolve_max_tokens(r, 30, limits());
  EXPECT_EQ(r.params.max_tokens, 16);
  resolve_max_tokens(near_end, 90, limits());
  EXPECT_EQ(near_end.params.max_tokens, 10);
  OpenAIRequest chat = parse_openai_request(R"({"messages":[{"role":"user","content":"x"}]})", Endpoint::Chat, limits());
  resolve_max_tokens(chat, 30, limits());
  EXPECT_EQ(chat.params.max_tokens, 70);
  // min_tokens beyond the default max_tokens is refused, as vLLM's min_tokens > max_tokens.
  EXPECT_EQ(parse_error(R"({"prompt":"x","min_tokens":17})").param, "min_tokens");
  EXPECT_EQ(parse_openai_request(R"({"prompt":"x","min_tokens":16})", Endpoint::Completions, limits()).params.min_tokens,
            16);
}

// max_tokens 0 with echo: the prompt alone (scored with logprobs); the engine is asked for one token.
TEST(OpenAIRequest, EchoWithoutGeneration) {
  const OpenAIRequest r =
      parse_openai_request(R"({"prompt":"x","max_tokens":0,"echo":true,"logprobs":2})", Endpoint::Completions, limits());
  EXPECT_TRUE(r.echo_only && r.echo && r.max_tokens_given);
  EXPECT_EQ(r.params.max_tokens, 1);
  EXPECT_EQ(r.params.prompt_logprobs, 2);
  EXPECT_TRUE(parse_openai_request(R"({"prompt":"x","max_tokens":0,"echo":true})", Endpoint::Completions, limits())
                  .echo_only);
  EXPECT_FALSE(parse_openai_request(R"({"prompt":"x","max_tokens":1,"echo":true})", Endpoint::Completions, limits())
                   .echo_only);
  // Without echo, as vLLM: refused.
  const ApiError e = parse_error(R"({"prompt":"x","max_tokens":0,"echo":false})");
  EXPECT_EQ(e.param, "max_tokens");
  EXPECT_NE(std::string(e.what()).find("echo"), std::string::npos) << e.what();
  EXPECT_EQ(parse_error(R"({"prompt":"x","max_tokens":0,"echo":true,"min_tokens":1})").param, "min_tokens");
  EXPECT_EQ(parse_error(R"({"messages":[{"role":"user","content":"x"}],"max_tokens":0})", Endpoint::Chat).param,
            "max_tokens");
}

TEST(OpenAIRequest, MaxTokensFromContext) {
  OpenAIRequest r = parse_openai_request(R"({"messages":[{"role":"user","content":"x"}]})", Endpoint::Chat, limits());
  resolve_max_tokens(r, 30, limits());
  EXPECT_EQ(r.params.max_tokens, 70);
  OpenAIRequest g = parse_openai_request(R"({"prompt":"x","max_tokens":70})", Endpoint::Completions, limits());
  resolve_max_tokens(g, 30, limits());
  EXPECT_EQ(g.params.max_tokens, 70);
  OpenAIRequest over = parse_openai_request(R"({"prompt":"x","max_tokens":71})", Endpoint::Completions, limits());
  EXPECT_THROW(resolve_max_tokens(over, 30, limits()), ApiError);
  EXPECT_THROW(resolve_max_tokens(r, 100, limits()), ApiError);
}

TEST(OpenAIResponse, ShapesAndInvalidUtf8) {
  const ResponseMeta chat = make_meta(Endpoint::Chat, "tiny", true);
  EXPECT_EQ(chat.id.rfind("chatcmpl-", 0), 0u);
  TokenLogprobs lp;
  lp.token = 1;
  lp.logprob = -0.5f;
  lp.top = {{1, -0.5f}, {2, -2.0f}};
  auto text_of = [](int32_t id) { return id == 1 ? std::string("\xe2\x82") : std::string("b"); };
  const nlohmann::json j =
      nlohmann::json::parse(dump(response_json(chat, {{"hi", {lp}, FinishReason::Stop}}, {3, 1}, text_of)));
  EXPECT_EQ(j["object"], "chat.completion");
  EXPECT_EQ(j["choices"][0]["message"]["content"], "hi");
  EXPECT_EQ(j["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(j["choices"][0]["logprobs"]["content"][0]["bytes"], nlohmann::json({0xe2, 0x82}));
  EXPECT_EQ(j["usage"]["total_tokens"], 4);

  const ResponseMeta cmpl = make_meta(Endpoint::Completions, "tiny", false);
  int64_t offset = 0;
  const std::string ev = sse_event(chunk_json(cmpl, 0, "x", {}, std::nullopt, text_of, &offset, true));
  EXPECT_EQ(ev.rfind("data: {", 0), 0u);
  EXPECT_EQ(ev.substr(ev.size() - 2), "\n\n");
  const nlohmann::json c = nlohmann::json::parse(ev.substr(6));
  EXPECT_EQ(c["choices"][0]["text"], "x");
  EXPECT_TRUE(c["choices"][0]["finish_reason"].is_null());
  EXPECT_TRUE(c.contains("usage") && c["usage"].is_null());
  EXPECT_EQ(sse_done(), "data: [DONE]\n\n");
  EXPECT_TRUE(usage_chunk_json(cmpl, {2, 3})["choices"].empty());
}

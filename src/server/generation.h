// POST /v1/completions and /v1/chat/completions without any socket: request body -> prompt
// tokens -> n engine requests, then the response produced piece by piece as the engine's
// outputs arrive (SSE text, or one JSON body at the end). The HTTP layer calls drain() when
// on_ready() tells it that something came.
#pragma once
#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "lite_llama/async_engine.h"
#include "server/chat_output.h"
#include "server/openai_request.h"
#include "server/openai_response.h"
#include "server/prompt_tokens.h"
#include "server/request_timing.h"

namespace lite_llama::server {

// State the handlers share with the server's lifecycle.
struct ServingContext {
  AsyncEngine& engine;
  RequestLimits limits;
  PromptPolicy prompt;
  std::atomic<bool> shutting_down{false};
  std::atomic<int> active{0};  // generation responses not finished
  std::atomic<int> thinks{-1};  // the chat template writes <think> blocks (-1: not known yet)
  std::atomic<int> tool_format{-1};  // the template's ToolFormat (-1: not known yet)
};

// How a chat answer is split (server/chat_output.h); off for completions.
struct ChatParsing {
  bool on = false, reasoning = false, in_think = false, tools = false;
  bool forced_calls = false;  // tool_choice required or named: the answer is calls only
  bool parallel_calls = true;  // parallel_tool_calls
  ToolFormat format = ToolFormat::Hermes;
  std::vector<std::string> tool_names;
};

class Generation {
 public:
  using Streams = std::vector<std::shared_ptr<RequestStream>>;
  // streams: r.n choices per prompt, prompt after prompt; n_prompt: the prompts' tokens together;
  // echo: per prompt, the text that starts its choices (completions' echo; empty: none);
  // echo_first: per prompt, its first token (with logprobs, the echo's first entry).
  // parse: chat answers go through a ChatOutputParser(reasoning, in_think, tools) per choice.
  Generation(ServingContext& ctx, const OpenAIRequest& r, Streams streams, int64_t n_prompt,
             ChatParsing parse = {}, std::vector<std::string> echo = {},
             std::vector<int32_t> echo_first = {});
  ~Generation();  // cancels what still runs: its client is gone
  Generation(const Generation&) = delete;
  Generation& operator=(const Generation&) = delete;

  bool streaming() const { return stream_; }
  // f runs (on any thread, quickly) whenever drain() may have something new.
  void on_ready(const std::function<void()>& f);
  // Streaming: the SSE text produced since the last call (the first call opens chat choices
  // with their role). Blocking: "" until every choice has finished, then nothing either:
  // status() and body() hold the response.
  std::string drain();
  bool finished() const { return all_finished_; }
  int status() const { return status_; }
  const std::string& body() const { return body_; }
  int64_t prompt_tokens() const { return usage_.prompt_tokens; }
  // The usage count once every choice finished; before that (a cancelled request's log line) the
  // tokens generated so far.
  int64_t completion_tokens() const { return all_finished_ ? usage_.completion_tokens : tokens_so_far_; }
  GenerationStamps& stamps() { return stamps_; }
  // The engine's stamps of the first choice.
  RequestStream::Times engine_times() const { return streams_.at(0)->times(); }

 private:
  void take(int i, std::optional<RequestOutput> o, std::string& out);
  void finish_blocking();
  // Choice i's prompt entries of logprobs (echo): the first token with none, then the prompt's.
  std::vector<TokenLogprobs> echo_logprobs(int i, RequestOutput& o) const;

  ServingContext& ctx_;
  struct Active {
    std::atomic<int>& n;
    explicit Active(std::atomic<int>& a) : n(a) { ++n; }
    ~Active() { --n; }
  } active_;
  ResponseMeta meta_;
  Streams streams_;
  std::vector<char> finished_;
  std::vector<int64_t> offsets_;
  std::vector<ChoiceResult> choices_;
  std::vector<std::unique_ptr<ChatOutputParser>> parsers_;  // per choice, when parsing chat
  int n_ = 1;                                               // choices per prompt
  std::vector<std::string> echo_;                           // per prompt, when echoing
  std::vector<int32_t> echo_first_;                         // per prompt, when echoing
  bool echo_logprobs_ = false;                              // echo with logprobs
  bool echo_only_ = false;  // max_tokens 0 with echo: the engine's one token is not shown
  std::vector<char> echo_taken_;  // per choice: its prompt logprobs arrived (first output)
  std::string grammar_error_;  // a choice's grammar admitted no next token
  std::string error_;
  bool stream_ = false, include_usage_ = false, started_ = false, all_finished_ = false;
  Usage usage_;
  int64_t tokens_so_far_ = 0;
  int status_ = 200;
  std::string body_;
  GenerationStamps stamps_;
};

ApiError unavailable(const ServingContext& ctx);

// Parses, tokenizes and submits a request (throws ApiError: 400, 404, 429, 503).
std::unique_ptr<Generation> start_generation(ServingContext& ctx, std::string_view body,
                                             Endpoint endpoint);

}  // namespace lite_llama::server

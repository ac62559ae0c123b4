// OpenAI request bodies -> validated request structs. Pure functions of (bytes, limits): no
// engine, no HTTP, so the fuzzer can drive them directly (tests/fuzz/fuzz_openai_request.cpp).
#pragma once
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "lite_llama/chat.h"
#include "lite_llama/sampling_params.h"

namespace lite_llama::server {

enum class Endpoint { Completions, Chat };

// An error the client caused (or the server must refuse), in OpenAI's error-object shape.
struct ApiError : std::runtime_error {
  int status;
  // The whole message for the reply: what() is a C string, cut at a NUL byte (as in a model name).
  std::string message;
  std::string type, param, code;
  ApiError(int status, std::string message, std::string param = "", std::string code = "",
           std::string type = "invalid_request_error")
      : std::runtime_error(message), status(status), message(std::move(message)), type(std::move(type)),
        param(std::move(param)), code(std::move(code)) {}
};

// What the parser needs to know about the served model.
struct RequestLimits {
  int64_t ctx = 0;         // tokens per sequence (prompt + completion)
  int64_t vocab_size = 0;  // valid token ids are [0, vocab_size)
  std::string model_name;  // the only model served
  int max_n = 16;          // choices per prompt (n)
  int max_choices = 512;   // choices per request: prompts x n
};

// One prompt of a completions request: text, or token ids when is_tokens.
struct CompletionPrompt {
  std::string text;
  std::vector<int32_t> tokens;
  bool is_tokens = false;
};

struct OpenAIRequest {
  Endpoint endpoint = Endpoint::Completions;
  std::string model;
  // Completions: one prompt or several (a batch: n choices each, indexed prompt * n + j).
  std::vector<CompletionPrompt> prompts;
  bool echo = false;  // completions: the prompt's text starts each choice's text
  // Completions' max_tokens 0 with echo (OpenAI's way to score a prompt): the response is the
  // prompt alone; params.max_tokens is 1 (the engine generates at least one), dropped by the server.
  bool echo_only = false;
  // Chat: the conversation and extra template variables (a JSON object, or empty).
  std::vector<ChatMessage> messages;
  std::string template_kwargs_json;
  bool add_generation_prompt = true;
  bool continue_final_message = false;  // vLLM's: generation continues the final (assistant) message

  SamplingParams params;  // max_tokens is final only after resolve_max_tokens
  bool max_tokens_given = false;
  std::string max_tokens_key = "max_tokens";  // or max_completion_tokens: the one sent (errors name it)
  int n = 1;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  bool logprobs = false;       // return logprobs (params.top_logprobs alternatives each)
  // Chat tool calling (server/tools.h): the tools for the template, "none" / "auto" /
  // "required" / a function's name.
  std::string tools_json;
  std::string tool_choice = "none";
  bool parallel_tool_calls = true;
};

// Parses and validates a request body. Throws ApiError (400 or 404) naming the parameter.
OpenAIRequest parse_openai_request(std::string_view body, Endpoint endpoint,
                                   const RequestLimits& limits);

// Without max_tokens, as OpenAI and vLLM: completions generate at most this many tokens, chat
// to the end of the context.
constexpr int kCompletionsDefaultMaxTokens = 16;

// Once the prompt is tokenized: refuses prompts that leave no room in the context and
// max_tokens beyond it; sets the default max_tokens (at most what the context leaves).
void resolve_max_tokens(OpenAIRequest& req, int64_t prompt_tokens, const RequestLimits& limits);

}  // namespace lite_llama::server

// POST /v1/completions and /v1/chat/completions: request -> prompt tokens -> n engine requests
// -> one JSON response, or an SSE stream that cancels its requests when the client goes away.
#pragma once
#include <httplib.h>

#include <atomic>

#include "lite_llama/async_engine.h"
#include "server/openai_request.h"
#include "server/prompt_tokens.h"

namespace lite_llama::server {

// State the handlers share with the server's lifecycle.
struct ServingContext {
  AsyncEngine& engine;
  RequestLimits limits;
  PromptPolicy prompt;
  std::atomic<bool> shutting_down{false};
  std::atomic<int> active{0};  // generation requests whose response is not finished
};

void handle_generation(ServingContext& ctx, const httplib::Request& req, httplib::Response& res,
                       Endpoint endpoint);

}  // namespace lite_llama::server

// A request's prompt as token ids, refused cheaply when it cannot fit the context.
#pragma once
#include <cstdint>
#include <string_view>
#include <vector>

#include "lite_llama/engine.h"
#include "server/openai_request.h"

namespace lite_llama::server {

struct PromptPolicy {
  // Chat: special-token strings inside message contents act as control tokens (forged turns
  // possible) instead of staying text.
  bool allow_special_in_content = false;
};

// Completions: the prompt with its special tokens parsed (as HF tokenizers and vLLM do). Chat:
// the rendered template, message contents as text (see Engine::tokenize_chat). Throws ApiError
// 400 naming "prompt" or "messages" for bad input and for a text whose first part alone already
// has more tokens than the context holds: a 20 MB prompt is refused in milliseconds, not after
// tokenizing all of it.
// Chat: what the rendered prompt tells the answer's parser (server/chat_output.h).
struct ChatPromptInfo {
  bool in_think = false;    // the prompt ends inside an opened <think> block
  bool think_done = false;  // the prompt ends with a closed </think> (no thinking to come)
};
// `which`: the completions prompt of a batch.
std::vector<int32_t> prompt_tokens(const Engine& eng, const OpenAIRequest& r,
                                   const RequestLimits& limits, const PromptPolicy& policy,
                                   ChatPromptInfo* info = nullptr, size_t which = 0);

// Throws the ApiError when a prefix of `text` has at least limits.ctx + a margin tokens.
// Tokenizes geometrically growing prefixes, so the work is a small multiple of the prefix that
// holds ctx tokens.
void refuse_if_longer_than_context(const Engine& eng, std::string_view text, bool parse_special,
                                   const RequestLimits& limits, const char* param);

}  // namespace lite_llama::server

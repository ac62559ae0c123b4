// OpenAI response bodies and stream chunks (completions and chat), and the error object.
#pragma once
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "lite_llama/engine.h"
#include "server/chat_output.h"
#include "server/openai_request.h"

namespace lite_llama::server {

// Decoded bytes of one token (may be part of a UTF-8 character).
using TokenText = std::function<std::string(int32_t)>;

struct ResponseMeta {
  Endpoint endpoint = Endpoint::Completions;
  std::string id;  // cmpl-... or chatcmpl-...
  int64_t created = 0;
  std::string model;
  bool logprobs = false;
};

struct Usage {
  int64_t prompt_tokens = 0, completion_tokens = 0;
  int64_t cached_tokens = 0;  // prompt tokens served from the prefix cache
};

// Chat answers split by ChatOutputParser: the thinking and the tool calls beside the content.
struct ChatExtra {
  std::string reasoning;
  std::vector<ToolCall> tool_calls;
  bool called_tools = false;  // finish_reason "tool_calls"
};

// One finished choice of a non-streaming response.
struct ChoiceResult {
  std::string text;
  std::vector<TokenLogprobs> logprobs;
  FinishReason finish = FinishReason::None;
  ChatExtra extra;
};

ResponseMeta make_meta(Endpoint endpoint, std::string model, bool logprobs);
const char* finish_reason_text(FinishReason r);

nlohmann::json response_json(const ResponseMeta& m, const std::vector<ChoiceResult>& choices,
                             const Usage& usage, const TokenText& text_of);

// A stream chunk for one choice. Chat: role_only sends the opening {"role": "assistant"}
// delta. Completions' logprobs count text offsets from text_offset (advanced past this chunk).
nlohmann::json chunk_json(const ResponseMeta& m, int index, const std::string& text,
                          const std::vector<TokenLogprobs>& logprobs,
                          std::optional<FinishReason> finish, const TokenText& text_of,
                          int64_t* text_offset, bool include_usage, bool role_only = false,
                          const ChatExtra* extra = nullptr);
// The final chunk of stream_options.include_usage: no choices, the usage.
nlohmann::json usage_chunk_json(const ResponseMeta& m, const Usage& usage);

nlohmann::json error_json(const ApiError& e);
// Serialises without throwing on invalid UTF-8 (token pieces may be partial characters).
std::string dump(const nlohmann::json& j);

}  // namespace lite_llama::server

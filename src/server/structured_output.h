// Structured-output parameters of an OpenAI request -> SamplingParams::grammar (GBNF) and
// logit_bias: response_format (json_object, json_schema), vLLM's guided_json / guided_regex /
// guided_choice / guided_grammar and its newer structured_outputs object. At most one
// constraint per request; every grammar is compiled here so that a bad schema or grammar is a
// 400 naming it before anything is queued.
#pragma once
#include <nlohmann/json.hpp>
#include <string_view>

#include "server/openai_request.h"

namespace lite_llama::server {

// `body`: the raw request (re-read with key order kept: a schema's property order is the
// order the output follows). Throws ApiError 400 naming the parameter.
void parse_structured_output(std::string_view body, const nlohmann::json& j, OpenAIRequest& r,
                             const RequestLimits& lim);

}  // namespace lite_llama::server

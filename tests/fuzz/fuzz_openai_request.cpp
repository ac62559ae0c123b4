// libFuzzer target for the OpenAI request parser: any byte string, read as a body of either
// endpoint, must parse into a request that passes the engine's own checks, or throw ApiError
// with a 4xx status; and every response shape must serialise whatever text it is given.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "server/chat_output.h"
#include "server/fast_json.h"
#include "server/openai_request.h"
#include "server/openai_response.h"
#include "server/sse.h"
#include "server/tools.h"

using namespace lite_llama;
using namespace lite_llama::server;

namespace {

void check(bool ok) {
  if (!ok) __builtin_trap();
}

void exercise(std::string_view body, Endpoint ep, const RequestLimits& lim) {
  OpenAIRequest r;
  try {
    r = parse_openai_request(body, ep, lim);
  } catch (const ApiError& e) {
    check(e.status == 400 || e.status == 404);
    return;
  }
  // What the server relies on once parsing succeeded.
  check(r.n >= 1 && r.n <= lim.max_n);
  check(r.model == lim.model_name);
  if (ep == Endpoint::Chat) check(!r.messages.empty());
  if (ep == Endpoint::Completions) check(!r.prompts.empty() && r.prompts.size() * size_t(r.n) <= size_t(lim.max_choices));
  for (const CompletionPrompt& p : r.prompts) {
    check(p.is_tokens ? !p.tokens.empty() : !p.text.empty());
    for (int32_t t : p.tokens) check(t >= 0 && t < lim.vocab_size);
  }
  // The text's byte count stands in for its token count (the first prompt's).
  const CompletionPrompt first = r.prompts.empty() ? CompletionPrompt{} : r.prompts[0];
  const int64_t n_prompt = first.is_tokens ? int64_t(first.tokens.size())
                                           : int64_t(first.text.size() + r.messages.size());
  try {
    resolve_max_tokens(r, n_prompt, lim);
  } catch (const ApiError& e) {
    check(e.status == 400);
    return;
  }
  check(r.params.max_tokens >= 1 && n_prompt + r.params.max_tokens <= lim.ctx);
  r.params.validate();  // must not throw: the parser validated already
  // Tool choices: the calls' grammar in each format, or a 400 naming the tools.
  if (!r.tools_json.empty())
    for (ToolFormat f : {ToolFormat::Hermes, ToolFormat::Llama3Json, ToolFormat::Mistral}) {
      OpenAIRequest c = r;
      try {
        tool_choice_grammar(c, f);
      } catch (const ApiError& e) {
        check(e.status == 400 && e.param == "tools");
      }
    }
}

// Where the fast JSON parser answers, nlohmann reads the same value (dump tells 1 from 1.0).
void same_json(std::string_view body) {
  const std::optional<nlohmann::json> fast = parse_json_fast(body, 32);
  if (!fast) return;
  const nlohmann::json ref = nlohmann::json::parse(body, nullptr, false);
  check(!ref.is_discarded() && *fast == ref && fast->dump() == ref.dump());
}

// The answer splitter in every format, the body as the model's output, cut in two.
void split_answer(std::string_view text) {
  for (ToolFormat f : {ToolFormat::Hermes, ToolFormat::Llama3Json, ToolFormat::Mistral}) {
    ChatOutputParser p(true, text.size() % 2 == 1, true, f, {"f", "get_weather"});
    const size_t cut = text.size() / 3;
    std::string out = p.push(text.substr(0, cut)).content;
    out += p.push(text.substr(cut)).content;
    out += p.finish().content;
    check(out.size() <= text.size());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  RequestLimits lim;
  lim.ctx = 2048;
  lim.vocab_size = 49152;
  lim.model_name = "m";
  same_json(body);
  exercise(body, Endpoint::Completions, lim);
  exercise(body, Endpoint::Chat, lim);
  split_answer(body);

  // Raw bytes (invalid UTF-8 included) as generated text and as token pieces.
  const std::string text(body.substr(0, 256));
  auto text_of = [&](int32_t id) { return text.substr(0, size_t(id) % (text.size() + 1)); };
  TokenLogprobs lp;
  lp.token = int32_t(size);
  lp.logprob = size % 2 ? -1.5f : -__builtin_inff();
  lp.top = {{1, -0.5f}, {int32_t(size / 2), -__builtin_inff()}};
  for (Endpoint ep : {Endpoint::Completions, Endpoint::Chat}) {
    const ResponseMeta meta = make_meta(ep, "m", true);
    int64_t offset = 0;
    check(!sse_event(chunk_json(meta, 0, text, {lp}, FinishReason::Stop, text_of, &offset, true)).empty());
    check(!dump(response_json(meta, {{text, {lp, lp}, FinishReason::Length}}, {1, 2}, text_of)).empty());
  }
  return 0;
}

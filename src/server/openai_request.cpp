#include "server/openai_request.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "server/fast_json.h"
#include "server/structured_output.h"
#include "server/tools.h"

namespace lite_llama::server {
namespace {

using json = nlohmann::json;

[[noreturn]] void bad(const std::string& param, const std::string& msg, const std::string& code = "") {
  throw ApiError(400, msg, param, code);
}

// nlohmann's parser keeps its own stack, but destroying or walking a value nested a million
// levels deep recurses; no OpenAI request needs more than a handful of levels.
void check_nesting(std::string_view body, int max_depth) {
  int depth = 0;
  bool in_string = false, escaped = false;
  for (char c : body) {
    if (in_string) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        in_string = false;
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) bad("", fmt::format("the request nests deeper than {} levels", max_depth));
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
}

const char* type_name(const json& v) {
  switch (v.type()) {
    case json::value_t::null: return "null";
    case json::value_t::object: return "an object";
    case json::value_t::array: return "an array";
    case json::value_t::string: return "a string";
    case json::value_t::boolean: return "a boolean";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned: return "an integer";
    case json::value_t::number_float: return "a number";
    default: return "invalid";
  }
}

[[noreturn]] void wrong_type(const std::string& key, const char* want, const json& got) {
  bad(key, fmt::format("'{}' must be {}, got {}", key, want, type_name(got)));
}

// Present and not null (clients send null for "default").
const json* field(const json& o, const char* key) {
  auto it = o.find(key);
  if (it == o.end() || it->is_null()) return nullptr;
  return &*it;
}

std::optional<bool> get_bool(const json& o, const char* key) {
  const json* v = field(o, key);
  if (!v) return std::nullopt;
  if (!v->is_boolean()) wrong_type(key, "a boolean", *v);
  return v->get<bool>();
}

// 5.0 is an integer to JavaScript clients.
bool integral(double d) { return std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9e15; }

// Integers as int64; unsigned values beyond int64 are clamped (every limit is far below).
int64_t as_int(const std::string& key, const json& v) {
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    return u > uint64_t(std::numeric_limits<int64_t>::max()) ? std::numeric_limits<int64_t>::max()
                                                              : int64_t(u);
  }
  if (v.is_number_integer()) return v.get<int64_t>();
  if (v.is_number_float() && integral(v.get<double>())) return int64_t(v.get<double>());
  wrong_type(key, "an integer", v);
}

std::optional<int64_t> get_int(const json& o, const char* key) {
  const json* v = field(o, key);
  if (!v) return std::nullopt;
  return as_int(key, *v);
}

// Numbers become float; beyond float's range is out of every parameter's range anyway.
std::optional<float> get_float(const json& o, const char* key) {
  const json* v = field(o, key);
  if (!v) return std::nullopt;
  if (!v->is_number()) wrong_type(key, "a number", *v);
  const double d = v->get<double>();
  if (!std::isfinite(d) || std::fabs(d) > 1e30) bad(key, fmt::format("'{}' is out of range", key));
  return float(d);
}

std::optional<std::string> get_string(const json& o, const char* key) {
  const json* v = field(o, key);
  if (!v) return std::nullopt;
  if (!v->is_string()) wrong_type(key, "a string", *v);
  return v->get<std::string>();
}

int checked_token(const std::string& key, const json& v, const RequestLimits& lim) {
  const int64_t t = as_int(key, v);
  if (t < 0 || t >= lim.vocab_size)
    bad(key, fmt::format("token id {} in '{}' is out of range [0, {})", t, key, lim.vocab_size));
  return int(t);
}

// A list holding a number or a boolean is meant as token ids, not as a list of prompts.
bool token_ids_meant(const json& a) {
  for (const json& x : a)
    if (x.is_number() || x.is_boolean()) return true;
  return false;
}

int prompt_token(const json& t, const RequestLimits& lim) {
  if (!t.is_number() || (t.is_number_float() && !integral(t.get<double>())))
    bad("prompt", fmt::format("'prompt' token ids must be integers, got {}", type_name(t)));
  return checked_token("prompt", t, lim);
}

CompletionPrompt one_prompt(const json& p, const RequestLimits& lim) {
  CompletionPrompt out;
  if (p.is_string()) {
    out.text = p.get<std::string>();
    if (out.text.empty()) bad("prompt", "'prompt' must not be empty");
    return out;
  }
  if (!p.is_array()) wrong_type("prompt", "a string, token ids, or a list of either", p);
  if (p.empty()) bad("prompt", "'prompt' must not be empty");
  out.is_tokens = true;
  for (const json& t : p) out.tokens.push_back(prompt_token(t, lim));
  return out;
}

// A string, token ids, or a batch of either (as OpenAI and vLLM take them).
void parse_prompt(const json& body, OpenAIRequest& r, const RequestLimits& lim) {
  const json* p = field(body, "prompt");
  if (!p) bad("prompt", "'prompt' is required");
  if (p->is_array() && p->empty()) bad("prompt", "'prompt' must not be empty");
  if (!p->is_array() || token_ids_meant(*p)) {
    r.prompts.push_back(one_prompt(*p, lim));
    return;
  }
  if (int64_t(p->size()) * r.n > lim.max_choices)
    bad("prompt", fmt::format("{} prompts with n = {} are more than the {} choices a request may have",
                              p->size(), r.n, lim.max_choices));
  for (const json& one : *p) r.prompts.push_back(one_prompt(one, lim));
}

std::string message_content(const json& m, const std::string& role) {
  const json* c = field(m, "content");
  if (!c) {
    // An assistant turn may be content-less (a tool call in OpenAI's API).
    if (role == "assistant") return "";
    bad("messages", fmt::format("a '{}' message needs 'content'", role));
  }
  if (c->is_string()) return c->get<std::string>();
  if (!c->is_array()) wrong_type("messages.content", "a string or a list of content parts", *c);
  std::string text;
  for (const json& part : *c) {
    if (!part.is_object()) wrong_type("messages.content", "a list of content parts", part);
    const std::optional<std::string> type = get_string(part, "type");
    if (type != "text")
      bad("messages.content", fmt::format("content parts of type '{}' are not supported (text only)",
                                          type.value_or("")));
    const std::optional<std::string> t = get_string(part, "text");
    if (!t) bad("messages.content", "a text content part needs 'text'");
    if (!text.empty()) text += "\n";
    text += *t;
  }
  return text;
}

void parse_messages(const json& body, OpenAIRequest& r) {
  const json* ms = field(body, "messages");
  if (!ms) bad("messages", "'messages' is required");
  if (!ms->is_array()) wrong_type("messages", "a list of messages", *ms);
  if (ms->empty()) bad("messages", "'messages' must not be empty");
  for (const json& m : *ms) {
    if (!m.is_object()) wrong_type("messages", "a list of message objects", m);
    std::optional<std::string> role = get_string(m, "role");
    if (!role) bad("messages", "every message needs a 'role'");
    if (*role == "developer") role = "system";  // OpenAI's newer name for the system role
    if (*role != "system" && *role != "user" && *role != "assistant" && *role != "tool")
      bad("messages", fmt::format("role '{}' is not supported (system, user, assistant or tool)", *role));
    ChatMessage cm;
    cm.role = *role;
    cm.content = message_content(m, *role);
    if (const json* tc = field(m, "tool_calls")) {
      if (*role != "assistant") bad("messages", "only assistant messages carry 'tool_calls'");
      if (!tc->is_array()) wrong_type("messages.tool_calls", "a list", *tc);
      for (const json& c : *tc) {
        const json* fn = c.is_object() ? field(c, "function") : nullptr;
        if (!fn || !fn->is_object() || !get_string(*fn, "name"))
          bad("messages", "every tool call needs a 'function' with a 'name'");
      }
      cm.tool_calls = tc->dump();
    }
    if (*role == "tool") {
      const std::optional<std::string> id = get_string(m, "tool_call_id");
      if (!id) bad("messages", "a 'tool' message needs 'tool_call_id'");
      cm.tool_call_id = *id;
    }
    if (std::optional<std::string> rc = get_string(m, "reasoning_content")) cm.reasoning_content = *rc;
    r.messages.push_back(std::move(cm));
  }
  if (const json* k = field(body, "chat_template_kwargs")) {
    if (!k->is_object()) wrong_type("chat_template_kwargs", "an object", *k);
    r.template_kwargs_json = k->dump();
  }
  if (std::optional<bool> g = get_bool(body, "add_generation_prompt")) r.add_generation_prompt = *g;
  if (std::optional<bool> c = get_bool(body, "continue_final_message")) r.continue_final_message = *c;
  // Without an explicit add_generation_prompt, continue_final_message turns it off; the engine
  // checks the pair and the final message (a 400 naming continue_final_message, prompt_tokens.cpp).
  if (r.continue_final_message && !get_bool(body, "add_generation_prompt")) r.add_generation_prompt = false;
}

void parse_stop(const json& body, SamplingParams& p) {
  const json* s = field(body, "stop");
  if (!s) return;
  if (s->is_string()) {
    p.stop.push_back(s->get<std::string>());
    return;
  }
  if (!s->is_array()) wrong_type("stop", "a string or a list of strings", *s);
  if (s->size() > 16) bad("stop", fmt::format("at most 16 stop strings, got {}", s->size()));
  for (const json& x : *s) {
    if (!x.is_string()) wrong_type("stop", "a list of strings", x);
    p.stop.push_back(x.get<std::string>());
  }
}

// Parameters this server does not implement are refused rather than silently ignored when
// they would change the result.
void refuse_unsupported(const json& body) {
  const int64_t best_of = get_int(body, "best_of").value_or(1);
  if (best_of < 1) bad("best_of", fmt::format("'best_of' must be >= 1, got {}", best_of));
  if (best_of > 1) bad("best_of", "'best_of' is not supported");
  if (!get_string(body, "suffix").value_or("").empty()) bad("suffix", "'suffix' is not supported");
  for (const char* key : {"functions"})
    if (const json* v = field(body, key); v && !v->empty())
      bad(key, fmt::format("'{}' is not supported", key));
}

void parse_logprobs(const json& body, OpenAIRequest& r) {
  if (r.endpoint == Endpoint::Completions) {
    r.echo = get_bool(body, "echo").value_or(false);
    if (std::optional<int64_t> k = get_int(body, "logprobs")) {
      if (*k < 0 || *k > 20) bad("logprobs", fmt::format("'logprobs' must be in [0, 20], got {}", *k));
      r.logprobs = true;
      r.params.top_logprobs = int(*k);
      // Echo lists the prompt's tokens first, their logprobs from a scoring of the prompt.
      if (r.echo) r.params.prompt_logprobs = int(*k);
    }
    return;
  }
  // vLLM's chat echo (the last message's text first) is not implemented.
  if (get_bool(body, "echo").value_or(false)) bad("echo", "'echo' is not supported for chat");
  r.logprobs = get_bool(body, "logprobs").value_or(false);
  const std::optional<int64_t> k = get_int(body, "top_logprobs");
  if (k && (*k < 0 || *k > 20))
    bad("top_logprobs", fmt::format("'top_logprobs' must be in [0, 20], got {}", *k));
  if (k && !r.logprobs) bad("top_logprobs", "'top_logprobs' needs 'logprobs': true");
  if (r.logprobs) r.params.top_logprobs = int(k.value_or(0));
}

void parse_sampling(const json& body, OpenAIRequest& r, const RequestLimits& lim) {
  SamplingParams& p = r.params;
  if (auto v = get_float(body, "temperature")) p.temperature = *v;
  if (auto v = get_float(body, "top_p")) p.top_p = *v;
  if (auto v = get_float(body, "min_p")) p.min_p = *v;
  if (auto v = get_float(body, "presence_penalty")) p.presence_penalty = *v;
  if (auto v = get_float(body, "frequency_penalty")) p.frequency_penalty = *v;
  if (auto v = get_float(body, "repetition_penalty")) p.repetition_penalty = *v;
  if (auto k = get_int(body, "top_k")) {
    if (*k < -1) bad("top_k", fmt::format("top_k must be >= -1 (-1 or 0 disables it), got {}", *k));
    p.top_k = *k <= 0 ? 0 : int(std::min<int64_t>(*k, std::numeric_limits<int32_t>::max()));
  }
  if (auto s = get_int(body, "seed")) p.seed = uint64_t(*s);
  if (auto e = get_bool(body, "ignore_eos")) p.ignore_eos = *e;
  if (auto e = get_bool(body, "include_stop_str_in_output")) p.include_stop_str_in_output = *e;
  if (auto e = get_bool(body, "skip_special_tokens")) p.skip_special_tokens = *e;
  parse_stop(body, p);
  if (const json* ids = field(body, "stop_token_ids")) {
    if (!ids->is_array()) wrong_type("stop_token_ids", "a list of token ids", *ids);
    for (const json& t : *ids) p.stop_token_ids.push_back(checked_token("stop_token_ids", t, lim));
  }
  if (const json* ids = field(body, "allowed_token_ids")) {  // vLLM's; validate() refuses []
    if (!ids->is_array()) wrong_type("allowed_token_ids", "a list of token ids", *ids);
    p.allowed_token_ids.emplace();
    for (const json& t : *ids) p.allowed_token_ids->push_back(checked_token("allowed_token_ids", t, lim));
  }
  if (const json* w = field(body, "bad_words")) {  // vLLM's
    if (!w->is_array()) wrong_type("bad_words", "a list of strings", *w);
    for (const json& x : *w) {
      if (!x.is_string()) wrong_type("bad_words", "a list of strings", x);
      p.bad_words.push_back(x.get<std::string>());
    }
  }
  // max_completion_tokens is the chat API's newer name; it wins where both are given.
  const char* key = "max_tokens";
  std::optional<int64_t> m = get_int(body, key);
  if (auto c = get_int(body, "max_completion_tokens")) {
    m = c;
    key = "max_completion_tokens";
  }
  const bool completions = r.endpoint == Endpoint::Completions;
  if (m && *m == 0 && completions && get_bool(body, "echo").value_or(false)) {
    // OpenAI's and vLLM's: the prompt echoed with no new token (lm-eval scores prompts so).
    r.echo_only = true;
    r.max_tokens_given = true;
    r.max_tokens_key = key;
    p.max_tokens = 1;
  } else if (m) {
    if (*m < 1)
      bad(key, fmt::format("{} must be >= 1{}, got {}", key, completions ? " (0 only with 'echo': true)" : "",
                           *m));
    if (*m > lim.ctx)
      bad(key, fmt::format("{} is {}, more than the model's context of {} tokens", key, *m, lim.ctx),
          "context_length_exceeded");
    p.max_tokens = int(*m);
    r.max_tokens_given = true;
    r.max_tokens_key = key;
  } else {
    // Provisional: resolve_max_tokens sets it from the prompt length.
    p.max_tokens = completions ? kCompletionsDefaultMaxTokens : 1;
  }
  // vLLM's min_tokens: no stop before that many tokens. Checked against max_tokens here and, when
  // max_tokens is left to the context, in resolve_max_tokens.
  int min_tokens = 0;
  if (auto v = get_int(body, "min_tokens")) {
    const int64_t most = r.echo_only ? 0 : (r.max_tokens_given || completions) ? p.max_tokens : lim.ctx;
    if (*v < 0 || *v > most) bad("min_tokens", fmt::format("'min_tokens' must be in [0, {}], got {}", most, *v));
    min_tokens = int(*v);
  }
  parse_logprobs(body, r);
  try {
    p.validate();
  } catch (const Error& e) {
    // validate() messages start with the parameter's name.
    const std::string msg = e.what();
    bad(msg.substr(0, msg.find(' ')), msg);
  }
  p.min_tokens = min_tokens;  // after validate(): max_tokens may still be the provisional 1
}

}  // namespace

OpenAIRequest parse_openai_request(std::string_view body, Endpoint endpoint,
                                   const RequestLimits& lim) {
  constexpr int kMaxDepth = 32;
  json j;
  if (std::optional<json> fast = parse_json_fast(body, kMaxDepth)) {
    j = std::move(*fast);
  } else {
    // Invalid JSON and the rare cases the fast parser leaves: nlohmann's errors, as before.
    check_nesting(body, kMaxDepth);
    try {
      j = json::parse(body);
    } catch (const json::exception& e) {
      bad("", fmt::format("the request body is not valid JSON: {}", e.what()), "invalid_json");
    }
  }
  if (!j.is_object()) bad("", "the request body must be a JSON object");
  OpenAIRequest r;
  r.endpoint = endpoint;
  r.model = get_string(j, "model").value_or(lim.model_name);
  if (r.model != lim.model_name)
    throw ApiError(404, fmt::format("The model '{}' does not exist; this server serves '{}'.",
                                    r.model, lim.model_name),
                   "model", "model_not_found");
  refuse_unsupported(j);
  if (auto n = get_int(j, "n")) {
    if (*n < 1 || *n > lim.max_n) bad("n", fmt::format("'n' must be in [1, {}], got {}", lim.max_n, *n));
    r.n = int(*n);
  }
  r.stream = get_bool(j, "stream").value_or(false);
  if (const json* so = field(j, "stream_options")) {
    if (!so->is_object()) wrong_type("stream_options", "an object", *so);
    // As OpenAI and vLLM: options of a stream that is not one are a mistake, not ignored.
    if (!r.stream) bad("stream_options", "'stream_options' is only allowed when 'stream' is true");
    r.include_usage = get_bool(*so, "include_usage").value_or(false);
  }
  parse_structured_output(body, j, r, lim);
  parse_tools(body, j, r);
  parse_sampling(j, r, lim);
  if (r.echo_only) r.params.grammar.clear();  // nothing the client sees is generated
  if (endpoint == Endpoint::Completions)
    parse_prompt(j, r, lim);
  else
    parse_messages(j, r);
  return r;
}

void resolve_max_tokens(OpenAIRequest& r, int64_t n_prompt, const RequestLimits& lim) {
  const std::string what = r.endpoint == Endpoint::Chat ? "messages" : "prompt";
  if (n_prompt <= 0) bad(what, fmt::format("the {} is empty", what));
  if (n_prompt >= lim.ctx)
    bad(what,
        fmt::format("This model's maximum context length is {} tokens, but the {} has {} tokens.",
                    lim.ctx, what, n_prompt),
        "context_length_exceeded");
  if (!r.max_tokens_given) {
    const int64_t room = lim.ctx - n_prompt;
    // As vLLM: the completions default is cut to what the context leaves, not refused.
    const bool completions = r.endpoint == Endpoint::Completions;
    r.params.max_tokens = int(completions ? std::min<int64_t>(kCompletionsDefaultMaxTokens, room) : room);
    if (r.params.min_tokens > r.params.max_tokens)
      bad("min_tokens", fmt::format("'min_tokens' is {}, more than the {} tokens the context leaves after the {}",
                                    r.params.min_tokens, r.params.max_tokens, what));
  } else if (n_prompt + r.params.max_tokens > lim.ctx) {
    bad(r.max_tokens_key,
        fmt::format("This model's maximum context length is {} tokens, but {} tokens were requested "
                    "({} in the {}, {} for the completion).",
                    lim.ctx, n_prompt + r.params.max_tokens, n_prompt, what, r.params.max_tokens),
        "context_length_exceeded");
  }
}

}  // namespace lite_llama::server

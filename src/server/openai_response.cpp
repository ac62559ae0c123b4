#include "server/openai_response.h"

#include <chrono>
#include <cmath>
#include <random>

#include "core/utf8.h"

namespace lite_llama::server {
namespace {

using json = nlohmann::json;

std::string random_hex(size_t n) {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  static const char* digits = "0123456789abcdef";
  std::string s(n, '0');
  for (char& c : s) c = digits[rng() & 15];
  return s;
}

// JSON has no -inf; a token the sampler ruled out gets a very small finite value (as vLLM).
double finite_logprob(float lp) { return std::isfinite(lp) ? double(lp) : -9999.0; }

json bytes_of(const std::string& s) {
  json b = json::array();
  for (unsigned char c : s) b.push_back(int(c));
  return b;
}

// A token's text in logprobs: a token that is part of a UTF-8 character (a byte of an emoji) is
// "bytes:\xf0\x9f" as in OpenAI's API; as JSON's replacement character every such token had one
// key, and completions' top_logprobs kept one of them under the wrong value.
std::string logprob_text(const std::string& t) {
  if (is_valid_utf8(t)) return t;
  std::string out = "bytes:";
  static const char* hex = "0123456789abcdef";
  for (unsigned char c : t) out += {'\\', 'x', hex[c >> 4], hex[c & 15]};
  return out;
}

json chat_token(int32_t id, float lp, const TokenText& text_of) {
  const std::string t = text_of(id);
  return {{"token", logprob_text(t)}, {"logprob", finite_logprob(lp)}, {"bytes", bytes_of(t)}};
}

json chat_logprobs(const std::vector<TokenLogprobs>& lps, const TokenText& text_of) {
  json content = json::array();
  for (const TokenLogprobs& l : lps) {
    json e = chat_token(l.token, l.logprob, text_of);
    json top = json::array();
    for (const auto& [id, lp] : l.top) top.push_back(chat_token(id, lp, text_of));
    e["top_logprobs"] = std::move(top);
    content.push_back(std::move(e));
  }
  return {{"content", std::move(content)}, {"refusal", nullptr}};
}

// The legacy completions shape: parallel arrays, alternatives as {token text: logprob}, the
// sampled token among them ("up to logprobs + 1 elements"). text_offset counts characters, as
// Python indexes the text: a token that continues a character another began points at that
// character. *offset counts the characters begun so far.
json completion_logprobs(const std::vector<TokenLogprobs>& lps, const TokenText& text_of,
                         int64_t* offset) {
  json tokens = json::array(), token_lps = json::array(), tops = json::array(),
       offsets = json::array();
  auto continuation = [](unsigned char c) { return (c & 0xC0) == 0x80; };
  for (const TokenLogprobs& l : lps) {
    const std::string t = text_of(l.token);
    tokens.push_back(logprob_text(t));
    if (std::isnan(l.logprob)) {  // an echoed prompt's first token: nothing predicted it
      token_lps.push_back(nullptr);
      tops.push_back(nullptr);
    } else {
      token_lps.push_back(finite_logprob(l.logprob));
      json top = json::object();
      for (const auto& [id, lp] : l.top) top[logprob_text(text_of(id))] = finite_logprob(lp);
      top[logprob_text(t)] = finite_logprob(l.logprob);
      tops.push_back(std::move(top));
    }
    offsets.push_back(*offset - (!t.empty() && continuation(uint8_t(t[0])) && *offset > 0 ? 1 : 0));
    for (unsigned char c : t) *offset += continuation(c) ? 0 : 1;
  }
  return {{"tokens", std::move(tokens)},
          {"token_logprobs", std::move(token_lps)},
          {"top_logprobs", std::move(tops)},
          {"text_offset", std::move(offsets)}};
}

json usage_json(const Usage& u) {
  return {{"prompt_tokens", u.prompt_tokens},
          {"completion_tokens", u.completion_tokens},
          {"total_tokens", u.prompt_tokens + u.completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", u.cached_tokens}}}};
}

json envelope(const ResponseMeta& m, const char* object) {
  return {{"id", m.id},
          {"object", object},
          {"created", m.created},
          {"model", m.model},
          {"system_fingerprint", "lite-llama"}};
}

json finish_json(std::optional<FinishReason> f) {
  if (!f || *f == FinishReason::None) return nullptr;
  return finish_reason_text(*f);
}

}  // namespace

ResponseMeta make_meta(Endpoint endpoint, std::string model, bool logprobs) {
  ResponseMeta m;
  m.endpoint = endpoint;
  m.id = (endpoint == Endpoint::Chat ? "chatcmpl-" : "cmpl-") + random_hex(24);
  m.created = std::chrono::duration_cast<std::chrono::seconds>(
                  std::chrono::system_clock::now().time_since_epoch())
                  .count();
  m.model = std::move(model);
  m.logprobs = logprobs;
  return m;
}

const char* finish_reason_text(FinishReason r) {
  switch (r) {
    case FinishReason::Stop: return "stop";
    case FinishReason::Length: return "length";
    case FinishReason::Cancelled: return "abort";  // vLLM's name for a request cut short
    case FinishReason::Error: return "error";
    case FinishReason::None: break;
  }
  return "stop";
}

// reasoning_content and tool_calls of a message or delta.
static void add_extra(json& msg, const ChatExtra& e) {
  if (!e.reasoning.empty()) msg["reasoning_content"] = e.reasoning;
  json calls = json::array();
  for (size_t k = 0; k < e.tool_calls.size(); ++k) {
    const ToolCall& c = e.tool_calls[k];
    calls.push_back({{"index", int(k)}, {"id", c.id}, {"type", "function"},
                     {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
  }
  if (!calls.empty()) msg["tool_calls"] = std::move(calls);
}

json response_json(const ResponseMeta& m, const std::vector<ChoiceResult>& choices,
                   const Usage& usage, const TokenText& text_of) {
  const bool chat = m.endpoint == Endpoint::Chat;
  json out = envelope(m, chat ? "chat.completion" : "text_completion");
  json cs = json::array();
  for (size_t i = 0; i < choices.size(); ++i) {
    const ChoiceResult& c = choices[i];
    json choice = {{"index", int(i)}};
    json lp = nullptr;
    if (m.logprobs) {
      int64_t offset = 0;
      lp = chat ? chat_logprobs(c.logprobs, text_of) : completion_logprobs(c.logprobs, text_of, &offset);
    }
    if (chat) {
      choice["message"] = {{"role", "assistant"}, {"content", c.text}};
      add_extra(choice["message"], c.extra);
      if (c.extra.tool_calls.empty()) choice["message"].erase("tool_calls");
      if (!c.extra.tool_calls.empty() && c.text.empty()) choice["message"]["content"] = nullptr;
    } else {
      choice["text"] = c.text;
    }
    choice["logprobs"] = std::move(lp);
    // Calls parsed from an answer max_tokens cut short keep "length": there may have been more.
    choice["finish_reason"] =
        c.extra.called_tools && c.finish != FinishReason::Length ? json("tool_calls") : finish_json(c.finish);
    cs.push_back(std::move(choice));
  }
  out["choices"] = std::move(cs);
  out["usage"] = usage_json(usage);
  return out;
}

json chunk_json(const ResponseMeta& m, int index, const std::string& text,
                const std::vector<TokenLogprobs>& logprobs, std::optional<FinishReason> finish,
                const TokenText& text_of, int64_t* text_offset, bool include_usage,
                bool role_only, const ChatExtra* extra) {
  const bool chat = m.endpoint == Endpoint::Chat;
  json out = envelope(m, chat ? "chat.completion.chunk" : "text_completion");
  json choice = {{"index", index}};
  if (chat) {
    json delta = json::object();
    if (role_only) {
      delta["role"] = "assistant";
      delta["content"] = "";
    } else if (!text.empty() || (!finish && !(extra && (!extra->reasoning.empty() || !extra->tool_calls.empty())))) {
      delta["content"] = text;
    }
    if (extra) add_extra(delta, *extra);
    choice["delta"] = std::move(delta);
  } else {
    choice["text"] = text;
  }
  json lp = nullptr;
  if (m.logprobs && !logprobs.empty())
    lp = chat ? chat_logprobs(logprobs, text_of) : completion_logprobs(logprobs, text_of, text_offset);
  choice["logprobs"] = std::move(lp);
  choice["finish_reason"] = finish && *finish != FinishReason::Length && extra && extra->called_tools
                                ? json("tool_calls")
                                : finish_json(finish);
  out["choices"] = json::array({std::move(choice)});
  if (include_usage) out["usage"] = nullptr;
  return out;
}

json usage_chunk_json(const ResponseMeta& m, const Usage& usage) {
  json out = envelope(m, m.endpoint == Endpoint::Chat ? "chat.completion.chunk" : "text_completion");
  out["choices"] = json::array();
  out["usage"] = usage_json(usage);
  return out;
}

json error_json(const ApiError& e) {
  json err = {{"message", e.message}, {"type", e.type}};
  err["param"] = e.param.empty() ? json(nullptr) : json(e.param);
  err["code"] = e.code.empty() ? json(nullptr) : json(e.code);
  return {{"error", std::move(err)}};
}

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

}  // namespace lite_llama::server

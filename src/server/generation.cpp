#include "server/generation.h"

#include <limits>

#include "core/error.h"
#include "grammar/compose.h"
#include "server/sse.h"
#include "server/tools.h"

namespace lite_llama::server {
namespace {

// With a seed, choice i uses seed + i so that choices differ and the response is reproducible.
Generation::Streams submit_all(ServingContext& ctx, const OpenAIRequest& r,
                               const std::vector<int32_t>& prompt) {
  Generation::Streams streams;
  auto cancel_all = [&] {
    for (auto& s : streams) ctx.engine.cancel(s->id());
  };
  try {
    for (int i = 0; i < r.n; ++i) {
      SamplingParams p = r.params;
      if (p.seed) p.seed = *p.seed + uint64_t(i);
      streams.push_back(ctx.engine.submit(prompt, p));
    }
  } catch (const QueueFull& e) {
    cancel_all();
    if (ctx.shutting_down || !ctx.engine.accepting()) throw unavailable(ctx);
    throw ApiError(429, e.what(), "", "rate_limit_exceeded", "rate_limit_exceeded");
  } catch (const Error& e) {
    cancel_all();
    throw ApiError(400, e.what());
  }
  return streams;
}

// Whether the model's template writes thinking as <think> blocks (Qwen3 and its kind): an
// earlier turn's reasoning_content rendered once shows it.
bool template_thinks(ServingContext& ctx) {
  int t = ctx.thinks.load();
  if (t < 0) {
    try {
      const std::vector<ChatMessage> probe = {{"user", "u", "", "", ""}, {"assistant", "a", "r", "", ""}};
      t = ctx.engine.engine().apply_chat_template(probe, false, "").find("<think>") != std::string::npos;
    } catch (const std::exception&) {
      t = 0;  // no template: chat requests fail elsewhere
    }
    ctx.thinks = t;
  }
  return t == 1;
}

// How the chat template writes tool calls (server/tool_formats.h), found once.
ToolFormat template_tool_format(ServingContext& ctx) {
  int f = ctx.tool_format.load();
  if (f < 0) {
    const Engine& eng = ctx.engine.engine();
    f = int(detect_tool_format([&eng](const std::vector<ChatMessage>& m, const std::string& extra) {
      return eng.apply_chat_template(m, true, extra);
    }));
    ctx.tool_format = f;
  }
  return ToolFormat(f);
}

}  // namespace

ApiError unavailable(const ServingContext& ctx) {
  if (ctx.shutting_down)
    return ApiError(503, "the server is shutting down", "", "server_shutting_down", "server_error");
  return ApiError(503, "the engine has stopped after a failure", "", "engine_failed", "server_error");
}

Generation::Generation(ServingContext& ctx, const OpenAIRequest& r, Streams streams, int64_t n_prompt,
                       ChatParsing parse, std::vector<std::string> echo, std::vector<int32_t> echo_first)
    : ctx_(ctx), active_(ctx.active), meta_(make_meta(r.endpoint, ctx.limits.model_name, r.logprobs)),
      streams_(std::move(streams)), finished_(streams_.size(), 0), offsets_(streams_.size(), 0),
      choices_(streams_.size()), n_(r.n), echo_(std::move(echo)), echo_first_(std::move(echo_first)),
      echo_logprobs_(!echo_.empty() && r.logprobs), echo_only_(r.echo_only), echo_taken_(streams_.size(), 0),
      stream_(r.stream), include_usage_(r.include_usage) {
  usage_.prompt_tokens = n_prompt;
  if (!stream_ && !echo_.empty())
    for (size_t i = 0; i < choices_.size(); ++i) choices_[i].text = echo_[i / size_t(n_)];
  if (parse.on)
    for (size_t i = 0; i < streams_.size(); ++i)
      parsers_.push_back(std::make_unique<ChatOutputParser>(parse.reasoning, parse.in_think, parse.tools,
                                                            parse.format, parse.tool_names, parse.forced_calls,
                                                            parse.parallel_calls));
}

Generation::~Generation() {
  for (size_t i = 0; i < streams_.size(); ++i) {
    streams_[i]->on_ready(nullptr);
    if (!finished_[i]) ctx_.engine.cancel(streams_[i]->id());
  }
}

void Generation::on_ready(const std::function<void()>& f) {
  for (auto& s : streams_) s->on_ready(f);
}

std::string Generation::drain() {
  std::string out;
  if (all_finished_) return out;
  const Engine& eng = ctx_.engine.engine();
  const TokenText text_of = [&eng](int32_t id) { return eng.detokenize({id}); };
  if (stream_ && !started_ && meta_.endpoint == Endpoint::Chat)
    for (size_t i = 0; i < streams_.size(); ++i)
      out += sse_event(chunk_json(meta_, int(i), "", {}, std::nullopt, text_of, nullptr,
                                  include_usage_, /*role_only=*/true));
  // Echo: each choice's first chunk is its prompt, as vLLM streams it (with logprobs, once the
  // prompt's logprobs come with the choice's first output: take()).
  if (stream_ && !started_ && !echo_.empty() && !echo_logprobs_)
    for (size_t i = 0; i < streams_.size(); ++i)
      out += sse_event(chunk_json(meta_, int(i), echo_[i / size_t(n_)], {}, std::nullopt, text_of, nullptr,
                                  include_usage_));
  started_ = true;
  bool all = true;
  for (size_t i = 0; i < streams_.size(); ++i) {
    if (finished_[i]) continue;
    for (RequestOutput& o : streams_[i]->wait(std::chrono::milliseconds(0))) {
      if (o.finished) finished_[i] = 1;
      if (!o.tokens.empty() && stamps_.first_token == TimingClock::time_point{}) stamps_.first_token = TimingClock::now();
      take(int(i), std::move(o), out);
    }
    if (!finished_[i] && streams_[i]->done()) {
      finished_[i] = 1;  // failed inside the engine: no final output comes
      take(int(i), std::nullopt, out);
    }
    all = all && finished_[i];
  }
  if (!all) return out;
  all_finished_ = true;
  if (stream_) {
    if (include_usage_) out += sse_event(usage_chunk_json(meta_, usage_));
    out += sse_done();
  } else {
    finish_blocking();
  }
  return out;
}

void Generation::take(int i, std::optional<RequestOutput> o, std::string& out) {
  const Engine& eng = ctx_.engine.engine();
  const TokenText text_of = [&eng](int32_t id) { return eng.detokenize({id}); };
  if (!o) {
    error_ = streams_[size_t(i)]->error();
    if (stream_)
      out += sse_event(error_json(ctx_.shutting_down ? unavailable(ctx_)
                                                     : ApiError(500, error_, "", "engine_error",
                                                                "server_error")));
    return;
  }
  if (echo_only_) {
    // The engine cannot stop before a first token; the client asked for none: it never was.
    o->text.clear();
    o->tokens.clear();
    o->logprobs.clear();
    o->completion_tokens = 0;
    if (o->finish_reason == FinishReason::Stop) o->finish_reason = FinishReason::Length;
  }
  tokens_so_far_ += int64_t(o->tokens.size());
  if (o->finished && o->finish_reason == FinishReason::Error) {
    // The grammar left no token to continue with: the client's constraint cannot be met.
    grammar_error_ = o->error;
    if (stream_) {
      if (!o->text.empty())
        out += sse_event(chunk_json(meta_, i, o->text, {}, std::nullopt, text_of, &offsets_[size_t(i)],
                                    include_usage_));
      out += sse_event(error_json(ApiError(400, grammar_error_, "", "grammar_dead_end")));
    }
    return;
  }
  if (o->finished) {
    usage_.completion_tokens += o->completion_tokens;
    if (i % n_ == 0) usage_.cached_tokens += o->cached_tokens;  // a prompt's choices share it
  }
  const bool echo_now = echo_logprobs_ && !echo_taken_[size_t(i)];
  echo_taken_[size_t(i)] = 1;
  if (!stream_) {
    ChoiceResult& c = choices_[size_t(i)];
    if (echo_now) c.logprobs = echo_logprobs(i, *o);  // the first output: nothing before it
    c.text += o->text;
    for (TokenLogprobs& l : o->logprobs) c.logprobs.push_back(std::move(l));
    if (o->finished) c.finish = o->finish_reason;
    return;
  }
  if (echo_now) {
    // Echo only: the prompt's chunk is the last one, as vLLM's.
    std::optional<FinishReason> done;
    if (echo_only_ && o->finished) done = o->finish_reason;
    out += sse_event(chunk_json(meta_, i, echo_[size_t(i / n_)], echo_logprobs(i, *o), done, text_of,
                                &offsets_[size_t(i)], include_usage_));
    if (done) return;
  }
  // A step that produced tokens sends a chunk even when their text is held back (part of a
  // UTF-8 character or of a stop string) or empty (dummy tokenizer): clients time tokens by
  // chunks.
  if (o->text.empty() && o->tokens.empty() && !o->finished) return;
  std::optional<FinishReason> fin;
  if (o->finished) fin = o->finish_reason;
  if (!parsers_.empty()) {
    ChatOutputParser& p = *parsers_[size_t(i)];
    ChatOutputParser::Delta d = p.push(o->text);
    ChatExtra extra;
    if (o->finished) {
      ChatOutputParser::Delta f = p.finish();
      d.content += f.content;
      d.reasoning += f.reasoning;
      extra.tool_calls = p.tool_calls();
      extra.called_tools = !extra.tool_calls.empty();
    }
    extra.reasoning = std::move(d.reasoning);
    if (extra.called_tools) {
      // As OpenAI streams them: the calls in a delta of their own, then an empty delta with the
      // finish reason.
      out += sse_event(chunk_json(meta_, i, d.content, o->logprobs, std::nullopt, text_of, &offsets_[size_t(i)],
                                  include_usage_, false, &extra));
      ChatExtra end;
      end.called_tools = true;
      out += sse_event(chunk_json(meta_, i, "", {}, fin, text_of, &offsets_[size_t(i)], include_usage_, false, &end));
      return;
    }
    out += sse_event(chunk_json(meta_, i, d.content, o->logprobs, fin, text_of, &offsets_[size_t(i)],
                                include_usage_, false, &extra));
    return;
  }
  out += sse_event(chunk_json(meta_, i, o->text, o->logprobs, fin, text_of, &offsets_[size_t(i)],
                              include_usage_));
}

std::vector<TokenLogprobs> Generation::echo_logprobs(int i, RequestOutput& o) const {
  // A NaN logprob is rendered as OpenAI's null entry (completion_logprobs).
  std::vector<TokenLogprobs> lps(1);
  lps[0].token = echo_first_[size_t(i / n_)];
  lps[0].logprob = std::numeric_limits<float>::quiet_NaN();
  for (const TokenLogprobs& l : o.prompt_logprobs) lps.push_back(l);  // shared by the n choices' echo
  return lps;
}

void Generation::finish_blocking() {
  auto fail = [&](const ApiError& e) {
    status_ = e.status;
    body_ = dump(error_json(e));
  };
  if (!error_.empty()) {
    fail(ctx_.shutting_down ? unavailable(ctx_) : ApiError(500, error_, "", "engine_error", "server_error"));
    return;
  }
  if (!grammar_error_.empty()) {
    fail(ApiError(400, grammar_error_, "", "grammar_dead_end"));
    return;
  }
  for (const ChoiceResult& c : choices_)
    if (c.finish == FinishReason::Cancelled) {
      fail(unavailable(ctx_));
      return;
    }
  for (size_t i = 0; i < parsers_.size(); ++i) {
    ChoiceResult& c = choices_[i];
    ChatOutputParser::Delta d = parsers_[i]->push(c.text);
    ChatOutputParser::Delta f = parsers_[i]->finish();
    c.text = d.content + f.content;
    c.extra.reasoning = d.reasoning + f.reasoning;
    c.extra.tool_calls = parsers_[i]->tool_calls();
    c.extra.called_tools = !c.extra.tool_calls.empty();
  }
  const Engine& eng = ctx_.engine.engine();
  auto text_of = [&eng](int32_t id) { return eng.detokenize({id}); };
  status_ = 200;
  body_ = dump(response_json(meta_, choices_, usage_, text_of));
}

std::unique_ptr<Generation> start_generation(ServingContext& ctx, std::string_view body,
                                             Endpoint endpoint) {
  if (ctx.shutting_down) throw unavailable(ctx);
  GenerationStamps stamps;
  OpenAIRequest r = parse_openai_request(body, endpoint, ctx.limits);
  stamps.parsed = TimingClock::now();
  if (endpoint == Endpoint::Completions) {
    // Each prompt of a batch has its own budget; all are checked before any is submitted, and
    // its n choices follow one another.
    std::vector<std::vector<int32_t>> prompts;
    std::vector<OpenAIRequest> each;
    std::vector<std::string> echo;
    std::vector<int32_t> echo_first;
    int64_t n_prompt = 0;
    for (size_t k = 0; k < r.prompts.size(); ++k) {
      prompts.push_back(prompt_tokens(ctx.engine.engine(), r, ctx.limits, ctx.prompt, nullptr, k));
      each.push_back(r);
      each.back().prompts.clear();
      resolve_max_tokens(each.back(), int64_t(prompts.back().size()), ctx.limits);
      n_prompt += int64_t(prompts.back().size());
      if (r.echo) echo_first.push_back(prompts.back()[0]);
      if (r.echo)
        echo.push_back(r.prompts[k].is_tokens ? ctx.engine.engine().detokenize(prompts.back()) : r.prompts[k].text);
    }
    stamps.prompt = TimingClock::now();
    Generation::Streams streams;
    try {
      for (size_t k = 0; k < prompts.size(); ++k)
        for (auto& s : submit_all(ctx, each[k], prompts[k])) streams.push_back(std::move(s));
    } catch (...) {
      for (auto& s : streams) ctx.engine.cancel(s->id());
      throw;
    }
    auto g = std::make_unique<Generation>(ctx, r, std::move(streams), n_prompt, ChatParsing{}, std::move(echo),
                                          std::move(echo_first));
    g->stamps() = stamps;
    return g;
  }
  ChatPromptInfo info;
  const std::vector<int32_t> prompt = prompt_tokens(ctx.engine.engine(), r, ctx.limits, ctx.prompt, &info);
  stamps.prompt = TimingClock::now();
  resolve_max_tokens(r, int64_t(prompt.size()), ctx.limits);
  ChatParsing parse;
  parse.reasoning = template_thinks(ctx);
  parse.in_think = info.in_think;
  parse.tools = r.tool_choice != "none";
  if (parse.tools) {
    parse.format = template_tool_format(ctx);
    parse.tool_names = tool_names(r);
    tool_choice_grammar(r, parse.format);
    parse.forced_calls = r.tool_choice != "auto";
    parse.parallel_calls = r.parallel_tool_calls;
  }
  parse.on = parse.reasoning || parse.in_think || parse.tools;
  // A structured output applies to the answer: the thinking before it stays free (unless the
  // prompt already closed an empty block, as Qwen3 does with enable_thinking false).
  if ((parse.reasoning || parse.in_think) && !info.think_done && !r.params.grammar.empty())
    r.params.grammar = grammar::after_think(r.params.grammar, parse.in_think);
  Generation::Streams streams = submit_all(ctx, r, prompt);
  auto g = std::make_unique<Generation>(ctx, r, std::move(streams), int64_t(prompt.size()), parse);
  g->stamps() = stamps;
  return g;
}

}  // namespace lite_llama::server

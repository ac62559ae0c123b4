#include "server/completion_handler.h"

#include <optional>

#include "core/error.h"
#include "server/http_util.h"
#include "server/openai_response.h"
#include "server/prompt_tokens.h"
#include "server/sse.h"

namespace lite_llama::server {
namespace {

using Streams = std::vector<std::shared_ptr<RequestStream>>;
using std::chrono::milliseconds;

// Counts a generation as in flight until its response is finished (the lifecycle waits for
// the count to drop before it stops the HTTP server).
class ActiveGuard {
 public:
  explicit ActiveGuard(std::atomic<int>& n) : n_(n) { ++n_; }
  ~ActiveGuard() { --n_; }
  ActiveGuard(const ActiveGuard&) = delete;
  ActiveGuard& operator=(const ActiveGuard&) = delete;

 private:
  std::atomic<int>& n_;
};

ApiError unavailable(const ServingContext& ctx) {
  if (ctx.shutting_down)
    return ApiError(503, "the server is shutting down", "", "server_shutting_down", "server_error");
  return ApiError(503, "the engine has stopped after a failure", "", "engine_failed", "server_error");
}

// Submits the n choices; with a seed, choice i uses seed + i so that choices differ and the
// whole response is reproducible.
Streams submit_all(ServingContext& ctx, const OpenAIRequest& r, const std::vector<int32_t>& prompt) {
  Streams streams;
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

// Drains whatever the unfinished streams have; waits on the first of them so that the loop
// sleeps while the engine works.
template <typename F>
void poll_streams(const Streams& streams, std::vector<char>& finished, milliseconds wait, F&& on_output) {
  bool waited = false;
  for (size_t i = 0; i < streams.size(); ++i) {
    if (finished[i]) continue;
    std::vector<RequestOutput> outs = streams[i]->wait(waited ? milliseconds(0) : wait);
    waited = true;
    for (RequestOutput& o : outs) {
      if (o.finished) finished[i] = 1;
      on_output(int(i), o);
    }
    if (!finished[i] && streams[i]->done()) {
      finished[i] = 1;  // failed inside the engine: no final output comes
      on_output(int(i), std::nullopt);
    }
  }
}

bool all_set(const std::vector<char>& v) {
  for (char c : v)
    if (!c) return false;
  return true;
}

void respond_blocking(ServingContext& ctx, const httplib::Request& http_req, httplib::Response& res,
                      const OpenAIRequest& r, Streams streams, int64_t n_prompt) {
  ActiveGuard guard(ctx.active);
  const Engine& eng = ctx.engine.engine();
  ClientConnection conn(http_req);
  std::vector<ChoiceResult> choices(streams.size());
  std::vector<char> finished(streams.size(), 0);
  Usage usage{n_prompt, 0};
  std::string error;
  while (!all_set(finished)) {
    poll_streams(streams, finished, milliseconds(100), [&](int i, std::optional<RequestOutput> o) {
      if (!o) {
        error = streams[size_t(i)]->error();
        return;
      }
      ChoiceResult& c = choices[size_t(i)];
      c.text += o->text;
      for (TokenLogprobs& l : o->logprobs) c.logprobs.push_back(std::move(l));
      if (o->finished) {
        c.finish = o->finish_reason;
        usage.completion_tokens += o->completion_tokens;
        if (i == 0) usage.cached_tokens = o->cached_tokens;  // the choices share one prompt
      }
    });
    if (!all_set(finished) && conn.closed()) {
      for (auto& s : streams) ctx.engine.cancel(s->id());
      request_trace().client_gone = true;
      res.status = 499;  // nginx's "client closed request"; nobody reads it
      return;
    }
  }
  request_trace().prompt_tokens = usage.prompt_tokens;
  request_trace().completion_tokens = usage.completion_tokens;
  if (!error.empty()) {
    if (ctx.shutting_down) throw unavailable(ctx);
    throw ApiError(500, error, "", "engine_error", "server_error");
  }
  for (const ChoiceResult& c : choices)
    if (c.finish == FinishReason::Cancelled) throw unavailable(ctx);
  const ResponseMeta meta = make_meta(r.endpoint, ctx.limits.model_name, r.logprobs);
  auto text_of = [&eng](int32_t id) { return eng.detokenize({id}); };
  send_json(res, 200, response_json(meta, choices, usage, text_of));
}

// Everything one SSE response needs across calls of the content provider. Its destructor runs
// when cpp-httplib drops the response: requests still running then lost their client.
struct StreamState {
  ServingContext& ctx;
  ActiveGuard guard;
  ResponseMeta meta;
  Streams streams;
  std::vector<char> finished;
  std::vector<int64_t> offsets;
  bool include_usage = false, started = false;
  Usage usage;
  ClientConnection conn;

  StreamState(ServingContext& c, const httplib::Request& req)
      : ctx(c), guard(c.active), conn(req) {}
  ~StreamState() {
    for (size_t i = 0; i < streams.size(); ++i)
      if (!finished[i]) ctx.engine.cancel(streams[i]->id());
  }

  // One call of the provider: returns false to drop the connection.
  bool pump(httplib::DataSink& sink) {
    const Engine& eng = ctx.engine.engine();
    auto text_of = [&eng](int32_t id) { return eng.detokenize({id}); };
    bool ok = true;
    auto write = [&](const std::string& s) {
      if (ok) ok = sink.write(s.data(), s.size());
    };
    if (!started) {
      started = true;
      if (meta.endpoint == Endpoint::Chat)
        for (size_t i = 0; i < streams.size(); ++i)
          write(sse_event(chunk_json(meta, int(i), "", {}, std::nullopt, text_of, nullptr,
                                     include_usage, /*role_only=*/true)));
    }
    poll_streams(streams, finished, milliseconds(100), [&](int i, std::optional<RequestOutput> o) {
      if (!o) {
        const std::string err = streams[size_t(i)]->error();
        write(sse_event(error_json(ctx.shutting_down
                                       ? unavailable(ctx)
                                       : ApiError(500, err, "", "engine_error", "server_error"))));
        return;
      }
      if (o->finished) {
        usage.completion_tokens += o->completion_tokens;
        if (i == 0) usage.cached_tokens = o->cached_tokens;  // the choices share one prompt
      }
      // A step that produced tokens sends a chunk even when their text is held back (part of a
      // UTF-8 character or of a stop string) or empty (dummy tokenizer): clients time tokens by
      // chunks.
      if (o->text.empty() && o->tokens.empty() && !o->finished) return;
      std::optional<FinishReason> fin;
      if (o->finished) fin = o->finish_reason;
      write(sse_event(chunk_json(meta, i, o->text, o->logprobs, fin, text_of, &offsets[size_t(i)],
                                 include_usage)));
    });
    request_trace().completion_tokens = usage.completion_tokens;
    if (ok && all_set(finished)) {
      if (include_usage) write(sse_event(usage_chunk_json(meta, usage)));
      write(sse_done());
      if (ok) sink.done();
      return ok;
    }
    if (ok && conn.closed()) ok = false;
    if (!ok) request_trace().client_gone = true;
    return ok;  // false: the destructor cancels what still runs
  }
};

void respond_stream(ServingContext& ctx, const httplib::Request& http_req, httplib::Response& res,
                    const OpenAIRequest& r, Streams streams, int64_t n_prompt) {
  auto st = std::make_shared<StreamState>(ctx, http_req);
  st->meta = make_meta(r.endpoint, ctx.limits.model_name, r.logprobs);
  st->finished.assign(streams.size(), 0);
  st->offsets.assign(streams.size(), 0);
  st->streams = std::move(streams);
  st->include_usage = r.include_usage;
  st->usage.prompt_tokens = n_prompt;
  res.status = 200;
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Accel-Buffering", "no");  // proxies: pass events on at once
  // cpp-httplib calls the provider outside its handler try/catch: nothing may escape it.
  res.set_chunked_content_provider("text/event-stream", [st](size_t, httplib::DataSink& sink) {
    try {
      return st->pump(sink);
    } catch (const std::exception& e) {
      const std::string ev = sse_event(error_json(ApiError(500, e.what(), "", "", "server_error")));
      sink.write(ev.data(), ev.size());
      return false;
    }
  });
}

}  // namespace

void handle_generation(ServingContext& ctx, const httplib::Request& req, httplib::Response& res,
                       Endpoint endpoint) {
  try {
    if (ctx.shutting_down) throw unavailable(ctx);
    OpenAIRequest r = parse_openai_request(req.body, endpoint, ctx.limits);
    const std::vector<int32_t> prompt = prompt_tokens(ctx.engine.engine(), r, ctx.limits, ctx.prompt);
    resolve_max_tokens(r, int64_t(prompt.size()), ctx.limits);
    request_trace().prompt_tokens = int64_t(prompt.size());
    Streams streams = submit_all(ctx, r, prompt);
    if (r.stream)
      respond_stream(ctx, req, res, r, std::move(streams), int64_t(prompt.size()));
    else
      respond_blocking(ctx, req, res, r, std::move(streams), int64_t(prompt.size()));
  } catch (const ApiError& e) {
    send_error(res, e);
  } catch (const std::bad_alloc&) {
    send_error(res, ApiError(500, "out of memory", "", "", "server_error"));
  } catch (const std::exception& e) {
    send_error(res, ApiError(500, e.what(), "", "", "server_error"));
  }
}

}  // namespace lite_llama::server

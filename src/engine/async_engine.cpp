#include "lite_llama/async_engine.h"

#include "core/error.h"
#include "core/log.h"

namespace lite_llama {

using Clock = std::chrono::steady_clock;

void LatencyHistogram::observe(double v) {
  size_t i = 0;
  while (i < bounds.size() && v > bounds[i]) ++i;
  ++counts[i];
  sum += v;
  ++count;
}

std::vector<RequestOutput> RequestStream::wait(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait_for(lock, timeout, [&] { return !pending_.empty() || done_; });
  std::vector<RequestOutput> out;
  out.swap(pending_);
  return out;
}

bool RequestStream::done() const {
  std::lock_guard<std::mutex> lock(mu_);
  return done_ && pending_.empty();
}

std::string RequestStream::error() const {
  std::lock_guard<std::mutex> lock(mu_);
  return error_;
}

RequestStream::Times RequestStream::times() const {
  std::lock_guard<std::mutex> lock(mu_);
  return times_;
}

void RequestStream::on_ready(std::function<void()> f) {
  bool now = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ready_ = f;
    now = !pending_.empty() || done_;
  }
  if (now && f) f();
}

void RequestStream::push(RequestOutput o) {
  std::function<void()> ready;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (o.finished) done_ = true;
    pending_.push_back(std::move(o));
    ready = ready_;
  }
  cv_.notify_all();
  if (ready) ready();
}

void RequestStream::fail(const std::string& msg) {
  std::function<void()> ready;
  {
    std::lock_guard<std::mutex> lock(mu_);
    error_ = msg;
    done_ = true;
    ready = ready_;
  }
  cv_.notify_all();
  if (ready) ready();
}

AsyncEngine::AsyncEngine(std::unique_ptr<Engine> engine, Options opts)
    : engine_(std::move(engine)), opts_(opts) {
  thread_ = std::thread([this] { loop(); });
}

AsyncEngine::~AsyncEngine() { shutdown(std::chrono::milliseconds(0)); }

bool AsyncEngine::accepting() const {
  std::lock_guard<std::mutex> lock(mu_);
  return accepting_;
}

std::shared_ptr<RequestStream> AsyncEngine::submit(std::vector<int32_t> prompt,
                                                   const SamplingParams& p) {
  p.validate();
  LL_CHECK(!prompt.empty(), "the prompt is empty");
  const ModelInfo& info = engine_->info();
  LL_CHECK(int64_t(prompt.size()) < info.ctx,
           "the prompt has {} tokens, more than the context of {} tokens allows", prompt.size(),
           info.ctx);
  for (int32_t t : prompt)
    LL_CHECK(t >= 0 && t < info.vocab_size, "token id {} is out of range", t);
  std::lock_guard<std::mutex> lock(mu_);
  if (!accepting_) throw QueueFull("the server is shutting down");
  if (int(incoming_.size()) + stats_.engine.waiting >= opts_.max_waiting) {
    ++stats_.requests_rejected;
    throw QueueFull("too many requests are waiting; retry later");
  }
  auto s = std::shared_ptr<RequestStream>(new RequestStream(next_id_++));
  s->times_.submitted = Clock::now();  // nobody else holds s yet
  incoming_.push_back({std::move(prompt), p, s});
  stats_.queued = int(incoming_.size());
  cv_.notify_all();
  return s;
}

void AsyncEngine::cancel(int64_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  cancels_.push_back(id);
  cv_.notify_all();
}

void AsyncEngine::shutdown(std::chrono::milliseconds grace) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!thread_.joinable()) return;
    accepting_ = false;
    draining_ = true;
    drain_deadline_ = Clock::now() + grace;
    cv_.notify_all();
  }
  thread_.join();
}

ServerStats AsyncEngine::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

void AsyncEngine::finish_all(const std::string& error) {
  for (auto& [id, l] : live_) l.stream->fail(error);
  live_.clear();
}

void AsyncEngine::loop() {
  std::map<int64_t, int64_t> engine_id;  // public id -> engine id
  for (;;) {
    std::deque<Pending> incoming;
    std::vector<int64_t> cancels;
    bool drain_over = false;
    Clock::time_point picked;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] {
        return !incoming_.empty() || !cancels_.empty() || engine_->has_unfinished() || draining_;
      });
      incoming.swap(incoming_);
      cancels.swap(cancels_);
      stats_.queued = 0;
      // Taken requests wait in the engine from now on, but its stats count them only after the
      // next step: until then submit() would let a burst past max_waiting.
      stats_.engine.waiting += int(incoming.size());
      picked = Clock::now();
      drain_over = draining_ && (Clock::now() >= drain_deadline_ || !engine_->has_unfinished());
    }
    // Requests that never reached the engine are cancelled here.
    for (int64_t id : cancels) {
      bool found = false;
      for (auto it = incoming.begin(); it != incoming.end(); ++it)
        if (it->stream->id() == id) {
          RequestOutput o;
          o.id = id;
          o.finished = true;
          o.finish_reason = FinishReason::Cancelled;
          it->stream->push(o);
          incoming.erase(it);
          found = true;
          std::lock_guard<std::mutex> lock(mu_);
          ++stats_.requests_cancelled;
          break;
        }
      auto e = engine_id.find(id);
      if (!found && e != engine_id.end()) engine_->cancel(e->second);
    }
    for (Pending& p : incoming) {
      if (draining_) {
        p.stream->fail("the server is shutting down");
        continue;
      }
      try {
        const int64_t eid = engine_->add_request(std::move(p.prompt), p.params);
        engine_id[p.stream->id()] = eid;
        const auto now = Clock::now();
        live_[eid] = Live{p.stream, now, now, true};
        std::lock_guard<std::mutex> lock(p.stream->mu_);
        p.stream->times_.picked = picked;
        p.stream->times_.added = now;
      } catch (const std::exception& e) {
        p.stream->fail(e.what());
        std::lock_guard<std::mutex> lock(mu_);
        ++stats_.requests_error;
      }
    }
    if (drain_over) {
      for (auto& [pub, eid] : engine_id) engine_->cancel(eid);
      try {
        while (engine_->has_unfinished()) engine_->step();
      } catch (const std::exception&) {
      }
      for (auto& [id, l] : live_) {
        RequestOutput o;
        o.id = l.stream->id();
        o.finished = true;
        o.finish_reason = FinishReason::Cancelled;
        l.stream->push(o);
      }
      live_.clear();
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
      return;
    }
    if (!engine_->has_unfinished()) {
      // The requests taken above were all refused or cancelled: no step refreshes the stats, and
      // their waiting count would stay (submit() then refuses everyone once it nears max_waiting).
      std::lock_guard<std::mutex> lock(mu_);
      stats_.engine = engine_->stats();
      continue;
    }
    std::vector<RequestOutput> outs;
    const auto step_begin = Clock::now();
    try {
      outs = engine_->step();
    } catch (const std::exception& e) {
      // An engine failure inside a step (e.g. a device error) fails every request in flight.
      LL_WARN("engine step failed: {}", e.what());
      const std::string why = std::string("engine failure: ") + e.what();
      finish_all(why);
      std::deque<Pending> queued;  // submitted while the step ran: no loop is left to take them
      {
        std::lock_guard<std::mutex> lock(mu_);
        stop_ = true;
        accepting_ = false;
        queued.swap(incoming_);
        stats_.queued = 0;
      }
      for (Pending& p : queued) p.stream->fail(why);
      return;
    }
    const auto now = Clock::now();
    std::lock_guard<std::mutex> lock(mu_);
    for (RequestOutput& o : outs) {
      auto it = live_.find(o.id);
      if (it == live_.end()) continue;
      Live& l = it->second;
      if (!o.tokens.empty()) {
        const double dt = std::chrono::duration<double>(now - (l.first ? l.submitted : l.last)).count();
        (l.first ? stats_.ttft : stats_.itl).observe(dt);
        if (l.first) {
          std::lock_guard<std::mutex> slock(l.stream->mu_);
          l.stream->times_.first_step_begin = step_begin;
          l.stream->times_.first_step_end = now;
        }
        l.first = false;
        l.last = now;
        stats_.generated_tokens += o.tokens.size();
      }
      const bool fin = o.finished;
      if (fin) {
        stats_.prompt_tokens += uint64_t(o.prompt_tokens);
        if (o.finish_reason == FinishReason::Cancelled)
          ++stats_.requests_cancelled;
        else
          ++stats_.requests_ok;
      }
      const int64_t pub = l.stream->id();
      o.id = pub;
      l.stream->push(std::move(o));
      if (fin) {
        live_.erase(it);
        engine_id.erase(pub);
      }
    }
    stats_.engine = engine_->stats();
  }
}

}  // namespace lite_llama

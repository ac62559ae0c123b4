// Public: the engine on its own thread. Many client threads submit requests and read their
// outputs as they come; the loop thread batches everything that runs (continuous batching).
#pragma once
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "lite_llama/engine.h"

namespace lite_llama {

// Thrown by submit() when too many requests wait (HTTP 429).
class QueueFull : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// One request's outputs, filled by the loop thread, drained by its client.
class RequestStream {
 public:
  int64_t id() const { return id_; }
  // Waits up to `timeout` for outputs; returns the ones pending (empty on timeout). After the
  // final output (finished) or an error, done() is true.
  std::vector<RequestOutput> wait(std::chrono::milliseconds timeout);
  bool done() const;
  // Non-empty when the request failed inside the engine.
  std::string error() const;
  // f runs after each new output and on failure (on the engine's thread: it must be quick, e.g.
  // post to an event loop), and once at once when outputs are already pending. Event-driven
  // servers use it instead of blocking in wait().
  void on_ready(std::function<void()> f);
  // Steady-clock stamps of the request's way through the loop thread (zero until reached), for
  // the server's per-request timing line.
  struct Times {
    std::chrono::steady_clock::time_point submitted, picked, added, first_step_begin, first_step_end;
  };
  Times times() const;

 private:
  friend class AsyncEngine;
  explicit RequestStream(int64_t id) : id_(id) {}
  void push(RequestOutput o);
  void fail(const std::string& msg);

  int64_t id_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<RequestOutput> pending_;
  std::function<void()> ready_;
  bool done_ = false;
  std::string error_;
  Times times_;
};

// Histogram with Prometheus-style cumulative buckets (seconds).
struct LatencyHistogram {
  std::vector<double> bounds;
  std::vector<uint64_t> counts;  // per bucket (not cumulative), last = +Inf
  double sum = 0;
  uint64_t count = 0;
  explicit LatencyHistogram(std::vector<double> b) : bounds(std::move(b)), counts(bounds.size() + 1) {}
  void observe(double v);
};

struct ServerStats {
  EngineStats engine;
  int queued = 0;  // submitted, not yet handed to the engine
  uint64_t requests_ok = 0, requests_cancelled = 0, requests_error = 0, requests_rejected = 0;
  uint64_t prompt_tokens = 0, generated_tokens = 0;
  LatencyHistogram ttft{{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}};
  LatencyHistogram itl{{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1}};
};

class AsyncEngine {
 public:
  struct Options {
    int max_waiting = 512;  // queued + waiting in the scheduler before submit() throws QueueFull
  };
  AsyncEngine(std::unique_ptr<Engine> engine, Options opts);
  ~AsyncEngine();
  AsyncEngine(const AsyncEngine&) = delete;
  AsyncEngine& operator=(const AsyncEngine&) = delete;

  // Validates now (throws lite_llama::Error for bad input, QueueFull when full) and queues.
  std::shared_ptr<RequestStream> submit(std::vector<int32_t> prompt, const SamplingParams& p);
  void cancel(int64_t id);
  // Stops accepting; lets running requests finish for up to `grace`, cancels the rest, joins.
  void shutdown(std::chrono::milliseconds grace);
  bool accepting() const;

  // Tokenizer, chat templates and model info (thread-safe: const, the template cache locked).
  const Engine& engine() const { return *engine_; }
  ServerStats stats() const;

 private:
  struct Pending {
    std::vector<int32_t> prompt;
    SamplingParams params;
    std::shared_ptr<RequestStream> stream;
  };
  struct Live {
    std::shared_ptr<RequestStream> stream;
    std::chrono::steady_clock::time_point submitted, last;
    bool first = true;
  };
  void loop();
  void finish_all(const std::string& error);

  std::unique_ptr<Engine> engine_;
  Options opts_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Pending> incoming_;
  std::vector<int64_t> cancels_;
  std::map<int64_t, Live> live_;  // engine id -> stream (loop thread only)
  std::map<int64_t, int64_t> ids_;  // public id -> engine id (under mu_)
  int64_t next_id_ = 1;
  bool stop_ = false, accepting_ = true;
  std::chrono::steady_clock::time_point drain_deadline_;
  bool draining_ = false;
  ServerStats stats_;
  std::thread thread_;
};

}  // namespace lite_llama

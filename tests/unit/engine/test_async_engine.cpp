// AsyncEngine's request lifecycle around its loop thread, on random (dummy) weights on the CPU.
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <thread>

#include "lite_llama/async_engine.h"
#include "lite_llama/engine.h"

using namespace lite_llama;

namespace {

std::unique_ptr<Engine> dummy_engine() {
  EngineOptions o;
  o.model = LL_SOURCE_DIR "/tests/fixtures/models/llama/config.json";
  o.load_format = "dummy";
  o.backend.device = DeviceKind::Cpu;
  o.backend.threads = 2;
  o.ctx = 64;
  o.max_num_seqs = 2;
  return Engine::create(o);
}

// The dummy engine, but its first step() waits for `go` and then fails (a device error).
class FailingEngine final : public Engine {
 public:
  explicit FailingEngine(std::unique_ptr<Engine> e) : e_(std::move(e)) {}
  std::promise<void> in_step, go;

  std::vector<RequestOutput> step() override {
    in_step.set_value();
    go.get_future().wait();
    throw std::runtime_error("device lost");
  }
  std::vector<int32_t> tokenize(std::string_view t, bool a, bool p) const override {
    return e_->tokenize(t, a, p);
  }
  std::string detokenize(const std::vector<int32_t>& ids) const override {
    return e_->detokenize(ids);
  }
  std::string token_text(int32_t id) const override { return e_->token_text(id); }
  std::string apply_chat_template(const std::vector<ChatMessage>& m, bool g, const std::string& x,
                                  bool c, const std::string& s) const override {
    return e_->apply_chat_template(m, g, x, c, s);
  }
  std::vector<int32_t> tokenize_chat(const std::vector<ChatMessage>& m, bool g,
                                     const std::string& x, bool a, std::string* t,
                                     bool c, const std::string& s) const override {
    return e_->tokenize_chat(m, g, x, a, t, c, s);
  }
  int64_t add_request(std::vector<int32_t> p, const SamplingParams& sp) override {
    return e_->add_request(std::move(p), sp);
  }
  void cancel(int64_t id) override { e_->cancel(id); }
  bool has_unfinished() const override { return e_->has_unfinished(); }
  std::vector<ScoreResult> score(const std::vector<std::vector<int32_t>>& s, int d,
                                 const LogitsSink& k, int top) override {
    return e_->score(s, d, k, top);
  }
  void set_profiling(bool on) override { e_->set_profiling(on); }
  std::vector<ProfileRow> profile_report() override { return e_->profile_report(); }
  const ModelInfo& info() const override { return e_->info(); }
  EngineStats stats() const override { return e_->stats(); }

 private:
  std::unique_ptr<Engine> e_;
};

SamplingParams greedy(int n) {
  SamplingParams p;
  p.temperature = 0;
  p.max_tokens = n;
  p.ignore_eos = true;
  return p;
}

// Waits for the stream's end; true when it ended in time.
bool drain(RequestStream& s, std::vector<RequestOutput>* out = nullptr, int seconds = 60) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  while (!s.done() && std::chrono::steady_clock::now() < deadline)
    for (RequestOutput& o : s.wait(std::chrono::milliseconds(50)))
      if (out) out->push_back(std::move(o));
  return s.done();
}

}  // namespace

// A request the engine refuses when the loop adds it (submit() does not check logit_bias ids
// against the vocabulary) left the engine idle with nothing to step: its waiting count stayed,
// so with max_waiting 1 every later request was refused as a full queue.
TEST(AsyncEngine, RequestRefusedByTheEngineLeavesNoWaitingCount) {
  AsyncEngine ae(dummy_engine(), AsyncEngine::Options{1});
  SamplingParams bad;
  bad.max_tokens = 2;
  bad.logit_bias = {{5000, 1.0f}};  // past the vocabulary of 1000
  auto refused = ae.submit({1, 2, 3}, bad);
  ASSERT_TRUE(drain(*refused));
  EXPECT_NE(refused->error().find("logit_bias"), std::string::npos) << refused->error();
  for (int i = 0; i < 200 && ae.stats().requests_error == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_EQ(ae.stats().requests_error, 1u);
  EXPECT_EQ(ae.stats().engine.waiting, 0);

  std::shared_ptr<RequestStream> s;
  ASSERT_NO_THROW(s = ae.submit({1, 2, 3}, greedy(3)));
  std::vector<RequestOutput> outs;
  ASSERT_TRUE(drain(*s, &outs));
  ASSERT_FALSE(outs.empty());
  EXPECT_EQ(outs.back().finish_reason, FinishReason::Length);
  ae.shutdown(std::chrono::milliseconds(0));
}

// A step that throws fails the requests in flight and stops the loop; one submitted while that
// step ran was still queued, and nothing answered it: its client waited forever.
TEST(AsyncEngine, StepFailureAlsoFailsTheRequestsQueuedDuringIt) {
  auto owned = std::make_unique<FailingEngine>(dummy_engine());
  FailingEngine& fe = *owned;
  AsyncEngine ae(std::move(owned), AsyncEngine::Options{});
  auto running = ae.submit({1, 2, 3}, greedy(3));
  fe.in_step.get_future().wait();
  auto queued = ae.submit({4, 5, 6}, greedy(3));
  fe.go.set_value();
  ASSERT_TRUE(drain(*running, nullptr, 10));
  EXPECT_NE(running->error().find("device lost"), std::string::npos) << running->error();
  ASSERT_TRUE(drain(*queued, nullptr, 10)) << "the request queued during the step never ended";
  EXPECT_NE(queued->error().find("device lost"), std::string::npos) << queued->error();
  EXPECT_FALSE(ae.accepting());
}

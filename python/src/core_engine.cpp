#include "core_engine.h"

#include <pybind11/stl.h>

#include <atomic>
#include <chrono>
#include <exception>
#include <thread>
#if defined(__GLIBCXX__)
#include <cxxabi.h>  // abi::__forced_unwind: pthread_exit's unwinding
#endif

namespace lite_llama::python {
namespace {

using Clock = std::chrono::steady_clock;
// Progress callbacks between finishes come at most this often (a bar needs no more).
constexpr auto kProgressEvery = std::chrono::milliseconds(100);

// Runs f; a lite_llama error it throws is the caller's bad argument.
template <typename F>
auto as_argument_error(F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const ArgumentError&) {
    throw;
  } catch (const std::runtime_error& e) {
    throw ArgumentError(e.what());
  }
}

std::atomic<unsigned long> main_thread{0};

// CPython ends a daemon thread that takes the GIL back while the interpreter exits with
// pthread_exit, whose unwinding through these C++ frames (a destructor, a catch (...)) aborted the
// process ("terminate called without an active exception"). Such a thread waits here instead, and
// the process exits around it. Not the main thread: it is the one exiting (closing a stream left
// open at exit aborts it), and parking it hung the exit.
void park_if_finalizing() {
#if PY_VERSION_HEX >= 0x030D0000
  const bool exiting = Py_IsFinalizing();
#else
  const bool exiting = _Py_IsFinalizing();
#endif
  if (exiting && PyThread_get_thread_ident() != main_thread.load())
    for (;;) std::this_thread::sleep_for(std::chrono::hours(1));
}

// py::gil_scoped_release that parks rather than return to an exiting interpreter. Should the
// interpreter start exiting while it waits for the GIL, pthread_exit's unwinding may leave the
// destructor (noexcept(false)), through pybind11 (which rethrows it) and CPython's frames, as
// CPython means it to.
class NoGil {
 public:
  NoGil() : state_(PyEval_SaveThread()) {}
  ~NoGil() noexcept(false) {
    park_if_finalizing();
    PyEval_RestoreThread(state_);
  }
  NoGil(const NoGil&) = delete;
  NoGil& operator=(const NoGil&) = delete;

 private:
  PyThreadState* state_;
};

// py::gil_scoped_acquire, parking first in the same way.
struct WithGil {
  WithGil() { park_if_finalizing(); }
  py::gil_scoped_acquire gil;
};

}  // namespace

void note_main_thread() {
  main_thread = py::module_::import("threading").attr("main_thread")().attr("ident").cast<unsigned long>();
}

CoreEngine::CoreEngine(const EngineOptions& opts) {
  NoGil nogil;
  engine_ = Engine::create(opts);
}

std::unique_lock<std::mutex> CoreEngine::lock() const {
  std::unique_lock<std::mutex> lk(mu_, std::try_to_lock);
  if (!lk.owns_lock())
    throw std::runtime_error(
        "this LLM is busy: another thread (or a callback of a running generate) is using it");
  return lk;
}

std::vector<int32_t> CoreEngine::tokenize(const std::string& text, bool add_special,
                                          bool parse_special) const {
  return as_argument_error([&] { return engine_->tokenize(text, add_special, parse_special); });
}

std::string CoreEngine::detokenize(const std::vector<int32_t>& ids) const {
  return as_argument_error([&] { return engine_->detokenize(ids); });
}

std::string CoreEngine::token_text(int32_t id) const {
  return as_argument_error([&] { return engine_->token_text(id); });
}

std::string CoreEngine::apply_chat_template(const std::vector<ChatMessage>& msgs,
                                            bool add_generation_prompt, const std::string& extra_json,
                                            bool continue_final, const std::string& chat_template) const {
  return as_argument_error([&] {
    return engine_->apply_chat_template(msgs, add_generation_prompt, extra_json, continue_final, chat_template);
  });
}

std::vector<Completion> CoreEngine::generate(std::vector<std::vector<int32_t>> prompts,
                                             const std::vector<SamplingParams>& params,
                                             const py::object& progress) {
  if (prompts.size() != params.size())
    throw ArgumentError("generate: " + std::to_string(prompts.size()) + " prompts but " +
                        std::to_string(params.size()) + " sampling parameters");
  auto lk = lock();
  if (engine_->has_unfinished())
    throw std::runtime_error("a generate_stream is still running: finish or close it first");
  std::vector<Completion> out(prompts.size());
  std::unordered_map<int64_t, size_t> index;
  std::vector<int64_t> ids;
  std::exception_ptr err;
  {
    NoGil nogil;
    try {
      for (size_t i = 0; i < prompts.size(); ++i) {
        out[i].prompt_tokens = int(prompts[i].size());
        const int64_t id = as_argument_error(
            [&] { return engine_->add_request(std::move(prompts[i]), params[i]); });
        index[id] = i;
        ids.push_back(id);
      }
      run_batch(out, index, progress);
#if defined(__GLIBCXX__)
    } catch (abi::__forced_unwind&) {
      throw;  // a thread being ended must unwind
#endif
    } catch (...) {
      err = std::current_exception();
    }
    if (err) cancel_and_drain(ids);
  }
  if (err) std::rethrow_exception(err);
  return out;
}

// Called without the GIL; takes it only between steps.
void CoreEngine::run_batch(std::vector<Completion>& out,
                           const std::unordered_map<int64_t, size_t>& index,
                           const py::object& progress) {
  std::vector<size_t> finished;
  int64_t generated = 0;
  Clock::time_point last = Clock::now();
  while (engine_->has_unfinished()) {
    for (RequestOutput& o : engine_->step()) {
      // A grammar no token can continue: the caller's constraint cannot be met (the server's 400);
      // its message, not a silent finish_reason "error".
      if (o.finish_reason == FinishReason::Error) throw ArgumentError(o.error);
      const size_t i = index.at(o.id);
      Completion& c = out[i];
      c.token_ids.insert(c.token_ids.end(), o.tokens.begin(), o.tokens.end());
      c.text += o.text;
      for (TokenLogprobs& lp : o.logprobs) c.logprobs.push_back(std::move(lp));
      if (!o.prompt_logprobs.empty()) c.prompt_logprobs = std::move(o.prompt_logprobs);
      generated += int64_t(o.tokens.size());
      if (o.finished) {
        c.finish_reason = finish_reason_name(o.finish_reason);
        c.cached_tokens = o.cached_tokens;
        finished.push_back(i);
      }
    }
    const Clock::time_point now = Clock::now();
    const bool report = !finished.empty() || now - last >= kProgressEvery;
    WithGil gil;
    if (PyErr_CheckSignals() != 0) throw py::error_already_set();
    if (report && !progress.is_none()) {
      progress(py::cast(finished), generated);
      finished.clear();
      last = now;
    }
  }
  if (!progress.is_none()) {
    WithGil gil;
    progress(py::cast(finished), generated);
  }
}

// Called without the GIL. Best effort: the error that brought us here is what the caller sees.
void CoreEngine::cancel_and_drain(const std::vector<int64_t>& ids) {
  try {
    for (int64_t id : ids) engine_->cancel(id);
    while (engine_->has_unfinished()) engine_->step();
  } catch (const std::exception&) {
  }
}

int64_t CoreEngine::add_request(std::vector<int32_t> prompt, const SamplingParams& params) {
  auto lk = lock();
  if (engine_->has_unfinished())
    throw std::runtime_error("another generate_stream is still running: finish or close it first");
  return as_argument_error([&] { return engine_->add_request(std::move(prompt), params); });
}

std::vector<RequestOutput> CoreEngine::step() {
  auto lk = lock();
  NoGil nogil;
  return engine_->step();
}

void CoreEngine::abort(const std::vector<int64_t>& ids) {
  auto lk = lock();
  NoGil nogil;
  cancel_and_drain(ids);
}

bool CoreEngine::has_unfinished() const {
  auto lk = lock();
  return engine_->has_unfinished();
}

std::vector<ScoreResult> CoreEngine::score(const std::vector<std::vector<int32_t>>& seqs,
                                           int decode_tail) {
  auto lk = lock();
  if (engine_->has_unfinished())
    throw std::runtime_error("score: a generate_stream is still running: finish or close it first");
  for (const auto& s : seqs)
    if (s.size() < 2) throw ArgumentError("score: a sequence needs at least 2 tokens");
  NoGil nogil;
  // Ctrl-C between positions, at most every kProgressEvery (it waited for the whole score: 28.6 s
  // for 6,000 tokens on 2 cores); the engine gives the sequences' KV slots back as it unwinds.
  Clock::time_point last = Clock::now();
  const LogitsSink interrupt = [&last](int, int, const float*, int64_t) {
    const Clock::time_point now = Clock::now();
    if (now - last < kProgressEvery) return;
    last = now;
    WithGil gil;
    if (PyErr_CheckSignals() != 0) throw py::error_already_set();
  };
  return as_argument_error([&] { return engine_->score(seqs, decode_tail, interrupt); });
}

EngineStats CoreEngine::stats() const {
  auto lk = lock();
  return engine_->stats();
}

}  // namespace lite_llama::python

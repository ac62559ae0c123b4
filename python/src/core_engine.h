// The engine behind lite_llama.LLM: one lite_llama::Engine driven from Python. generate() runs
// the whole continuous-batching loop here with the GIL released; Python only sees the results,
// a progress callback and the KeyboardInterrupt check between steps (each with the GIL briefly).
#pragma once
#include <pybind11/pybind11.h>

#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include "lite_llama/engine.h"

namespace lite_llama::python {

namespace py = pybind11;

// A bad argument (prompt, sampling parameter, token id, chat message): ValueError in Python.
class ArgumentError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// One request of a batch, accumulated over its steps.
struct Completion {
  std::vector<int32_t> token_ids;
  std::string text;
  std::vector<TokenLogprobs> logprobs;
  std::vector<TokenLogprobs> prompt_logprobs;  // one per prompt token after the first, when asked
  std::string finish_reason;
  int prompt_tokens = 0;
  int cached_tokens = 0;
};

// Remembers the interpreter's main thread, the one that finalizes it (called at import).
void note_main_thread();

class CoreEngine {
 public:
  explicit CoreEngine(const EngineOptions& opts);  // loads with the GIL released

  // Tokenizer and chat templates: const and thread-safe in the engine, so no lock.
  std::vector<int32_t> tokenize(const std::string& text, bool add_special,
                                bool parse_special) const;
  std::string detokenize(const std::vector<int32_t>& ids) const;
  std::string token_text(int32_t id) const;
  // chat_template: Jinja source used instead of the engine's template ("" for the engine's).
  std::string apply_chat_template(const std::vector<ChatMessage>& msgs, bool add_generation_prompt,
                                  const std::string& extra_json, bool continue_final = false,
                                  const std::string& chat_template = "") const;

  // Submits every prompt, steps until all have finished and returns them in input order.
  // progress (callable or None) gets the indices finished since its last call and the tokens
  // generated so far. On any exception (KeyboardInterrupt included) every request is cancelled
  // and the engine drained before it propagates.
  std::vector<Completion> generate(std::vector<std::vector<int32_t>> prompts,
                                   const std::vector<SamplingParams>& params,
                                   const py::object& progress);

  // One request stepped from Python (LLM.generate_stream): only while nothing else runs.
  int64_t add_request(std::vector<int32_t> prompt, const SamplingParams& params);
  std::vector<RequestOutput> step();
  void abort(const std::vector<int64_t>& ids);  // cancels them, steps until the engine is idle
  bool has_unfinished() const;

  std::vector<ScoreResult> score(const std::vector<std::vector<int32_t>>& seqs, int decode_tail);
  const ModelInfo& info() const { return engine_->info(); }
  EngineStats stats() const;

 private:
  std::unique_lock<std::mutex> lock() const;  // throws RuntimeError when another call runs
  void run_batch(std::vector<Completion>& out, const std::unordered_map<int64_t, size_t>& index,
                 const py::object& progress);
  void cancel_and_drain(const std::vector<int64_t>& ids);

  std::unique_ptr<Engine> engine_;
  mutable std::mutex mu_;
};

}  // namespace lite_llama::python

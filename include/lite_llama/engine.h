// Public C++ API of lite-llama: load a model, add requests, step, receive tokens as they come.
// No CUDA or internal headers leak through here.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "lite_llama/backend_options.h"
#include "lite_llama/chat.h"
#include "lite_llama/sampling_params.h"

namespace lite_llama {

struct EngineOptions {
  std::string model = "default";  // .gguf file, HF model directory, or "default"
  int ctx = 0;                    // max tokens a sequence; 0: the model's, at most 131072 (CPU: 8192), cut to the pool
  int max_num_seqs = 0;           // sequences decoded together; 0 = backend default
  int max_batched_tokens = 0;     // tokens per step (decode + chunked prefill); 0 = default
  // Prompt tokens at most in a step that also decodes running requests; 0 = max_batched_tokens.
  // Smaller chunks (2048) keep streams' inter-token gaps short beside long prompts, for some
  // throughput (docs/benchmarks/serving.md, "Long prompts").
  int max_prefill_with_decodes = 0;
  int64_t kv_tokens = 0;          // KV pool size in tokens; 0 = sized from the above
  float gpu_memory_utilization = 0.9f;
  bool cuda_graph = true;
  // Automatic prefix caching: finished and running requests leave their KV in a radix tree that
  // later requests with the same token prefix reuse.
  bool prefix_cache = true;
  BackendOptions backend;         // device, threads, dtype, --quantize, kernel tuning
  // Tensor parallelism: each layer split over this many GPUs (ranks 0..tp-1 on CUDA devices
  // 0..tp-1, NCCL between them), or over as many CPU backends sharing memory.
  int tp = 1;
  std::string load_format = "auto";  // auto | dummy (random weights from a config.json)
  uint64_t dummy_seed = 0;
  // Structured outputs: a new grammar's token-mask cache is built ahead of its first request's
  // decode, on this many threads (0: half the hardware threads, 1 to 8; < 0: not at all, the
  // cache is then built during decode), for at most this long (<= 0: not at all).
  int grammar_warm_threads = 0;
  double grammar_warm_ms = 2000;
  // Jinja source of a chat template used in place of the model's everywhere (vLLM's
  // --chat-template); empty: the model's own. Parsed at creation: create() throws if it does not.
  std::string chat_template;
};

struct TokenLogprobs {
  int32_t token = 0;
  float logprob = 0;
  int32_t rank = 0;  // 1 + the vocabulary tokens with a strictly higher logprob (vLLM's rank)
  std::vector<std::pair<int32_t, float>> top;  // best alternatives, most likely first
};

// What a request produced in one step.
struct RequestOutput {
  int64_t id = 0;
  std::vector<int32_t> tokens;          // new tokens this step
  std::string text;                     // new complete UTF-8 text (stop strings held back)
  std::vector<TokenLogprobs> logprobs;  // one per new token when requested
  // SamplingParams::prompt_logprobs: one per prompt token after the first (what position i - 1
  // gave token i), on the request's first output only.
  std::vector<TokenLogprobs> prompt_logprobs;
  bool finished = false;
  FinishReason finish_reason = FinishReason::None;
  int prompt_tokens = 0;
  int completion_tokens = 0;
  int cached_tokens = 0;  // prompt tokens whose KV came from the prefix cache (on the final output)
  std::string error;      // why the request ended with FinishReason::Error
};

struct ModelInfo {
  std::string path, name, arch, format, weight_dtype, rope_scaling, device, backend;
  int64_t params = 0, vocab_size = 0, hidden_size = 0, num_layers = 0, num_heads = 0;
  int64_t num_kv_heads = 0, head_dim = 0, intermediate_size = 0, context_length = 0;
  int64_t kv_bytes_per_token = 0, ctx = 0, kv_slots = 0, max_num_seqs = 0;
  int64_t tp = 1;  // tensor-parallel ranks (the byte counts below are one rank's)
  // Mixture of experts: experts per sparse layer, active per token, their FFN size (0: dense).
  int64_t num_experts = 0, experts_per_token = 0, expert_intermediate_size = 0;
  float rope_theta = 0;
  bool tied_embeddings = false, qkv_bias = false, qk_norm = false;
  double load_ms = 0;
  size_t weight_bytes = 0, kv_bytes = 0, activation_bytes = 0;
  std::vector<std::pair<std::string, int32_t>> special_tokens;  // name -> id
  std::vector<int32_t> stop_ids;
};

// Teacher-forced scoring of one sequence: position i predicts token i + 1.
struct ScoreResult {
  std::vector<float> logprobs;  // log p(tokens[i + 1] | tokens[0..i]), n - 1 values
  std::vector<int32_t> argmax;  // the model's top-1 next token at each position, n - 1 values
  // With top_logprobs >= 0: per position, tokens[i + 1] with its logprob and rank (as generation
  // reports them) and the top_logprobs best; else empty.
  std::vector<TokenLogprobs> tokens;
};
// Receives the full logits row of (sequence, position) while scoring.
using LogitsSink = std::function<void(int seq, int pos, const float* logits, int64_t vocab)>;

struct EngineStats {
  int running = 0, waiting = 0;
  int64_t kv_slots_used = 0, kv_slots_total = 0;  // used: held by requests (not cache-only slots)
  int64_t preemptions = 0;
  // Prefix cache: slots it holds now, and over the engine's life the prompt tokens looked up and
  // those found cached.
  int64_t prefix_cached_tokens = 0, prefix_query_tokens = 0, prefix_hit_tokens = 0;
  size_t device_free = 0, device_total = 0;  // GPU memory (0 on the CPU)
};

class Engine {
 public:
  virtual ~Engine() = default;
  // Throws lite_llama::Error with a one-line message on any bad input.
  static std::unique_ptr<Engine> create(const EngineOptions& opts);

  virtual std::vector<int32_t> tokenize(std::string_view text, bool add_special = true,
                                        bool parse_special = false) const = 0;
  virtual std::string detokenize(const std::vector<int32_t>& ids) const = 0;
  virtual std::string token_text(int32_t id) const = 0;
  // Renders the model's chat template (EngineOptions::chat_template where given). extra_json:
  // extra template variables as a JSON object (e.g. {"enable_thinking": false}); empty for none.
  // continue_final: the text ends right after the final message's content, so that generation
  // continues it (vLLM's and transformers' continue_final_message; throws, naming it, with
  // add_generation_prompt, when the final message is not an assistant one, or when its content is
  // empty or not in the rendered text). chat_template: Jinja source rendered instead, with the
  // same variables (the model's bos_token and eos_token); empty: the engine's template. The last
  // few sources are kept parsed. Throws when the template does not parse or fails to render.
  virtual std::string apply_chat_template(const std::vector<ChatMessage>& msgs,
                                          bool add_generation_prompt,
                                          const std::string& extra_json = "",
                                          bool continue_final = false,
                                          const std::string& chat_template = "") const = 0;

  // The chat template rendered and tokenized for generation. Special-token strings inside message
  // contents stay ordinary text unless allow_special_in_content (then they act as the control
  // tokens they spell, like the template's own markers). text: if given, gets the text that was
  // tokenized (saves a second rendering to look at it). continue_final, chat_template: as
  // apply_chat_template's.
  virtual std::vector<int32_t> tokenize_chat(const std::vector<ChatMessage>& msgs,
                                             bool add_generation_prompt,
                                             const std::string& extra_json,
                                             bool allow_special_in_content,
                                             std::string* text = nullptr,
                                             bool continue_final = false,
                                             const std::string& chat_template = "") const = 0;

  // Queues a request; throws on an empty prompt, a prompt that does not fit the context, or
  // invalid parameters. Returns its id.
  virtual int64_t add_request(std::vector<int32_t> prompt, const SamplingParams& params) = 0;
  virtual void cancel(int64_t id) = 0;
  // Runs one scheduling step (prefill chunks + decodes) and returns what each request produced.
  virtual std::vector<RequestOutput> step() = 0;
  virtual bool has_unfinished() const = 0;

  // Runs each sequence teacher-forced: its first n - decode_tail tokens through chunked
  // prefill, the last decode_tail through batched decode steps (both attention paths). Only
  // when no request is in flight (requests' prompt_logprobs are scored between steps instead).
  // Used for perplexity and accuracy checks. top_logprobs >= 0 fills ScoreResult::tokens.
  virtual std::vector<ScoreResult> score(const std::vector<std::vector<int32_t>>& seqs,
                                         int decode_tail, const LogitsSink& sink = {},
                                         int top_logprobs = -1) = 0;

  // Device time per op family while on (CUDA; graphs are bypassed so each op is timed).
  struct ProfileRow {
    std::string family;
    double ms = 0;
    int64_t calls = 0;
  };
  virtual void set_profiling(bool on) = 0;
  virtual std::vector<ProfileRow> profile_report() = 0;

  virtual const ModelInfo& info() const = 0;
  virtual EngineStats stats() const = 0;
};

}  // namespace lite_llama

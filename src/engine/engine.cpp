// Engine: ties model files, backend, KV pool, scheduler, decoder and samplers together.
#include "lite_llama/engine.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <mutex>
#include <unordered_map>

#include "backends/factory.h"
#include "core/error.h"
#include "core/log.h"
#include "core/timer.h"
#include "engine/model_files.h"
#include "engine/scheduler.h"
#include "engine/text_stream.h"
#include "kv/kv_pool.h"
#include "model/decoder.h"
#include "model/kv_cache.h"
#include "sampling/sampler.h"
#include "tokenizer/chat_template.h"

namespace lite_llama {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;

struct Request {
  Request(int64_t id, std::vector<int32_t> prompt, const SamplingParams& p, const Tokenizer& tok)
      : params(p), sampler(p, prompt), text(tok, p.stop) {
    seq.id = id;
    seq.num_prompt = int(prompt.size());
    seq.tokens = std::move(prompt);
  }
  SamplingParams params;
  Sequence seq;
  sampling::SequenceSampler sampler;
  TextStream text;
};

class EngineImpl final : public Engine {
 public:
  explicit EngineImpl(const EngineOptions& o) {
    const double t0 = now_ms();
    LL_CHECK(o.load_format == "auto" || o.load_format == "dummy",
             "--load-format must be auto or dummy, got '{}'", o.load_format);
    files_ = o.load_format == "dummy" ? open_dummy_model(o.model, o.dummy_seed)
                                      : open_model_files(o.model);
    const ModelConfig& cfg = files_.config;
    backend_ = make_backend({o.device, o.threads, o.dtype});
    const bool cpu = backend_->device() == Device::CPU;
    Weights weights = load_weights(cfg, *files_.weights, *backend_);

    LL_CHECK(o.ctx >= 0, "--ctx must be positive, got {}", o.ctx);
    LL_CHECK(o.ctx <= cfg.max_position_embeddings,
             "--ctx {} exceeds the model's context length {}", o.ctx, cfg.max_position_embeddings);
    ctx_ = o.ctx ? o.ctx : int(std::min<int64_t>(cfg.max_position_embeddings, 8192));
    LL_CHECK(o.max_num_seqs >= 0 && o.max_num_seqs <= 4096, "--max-num-seqs must be in 1..4096");
    max_seqs_ = o.max_num_seqs ? o.max_num_seqs : (cpu ? 16 : 256);
    LL_CHECK(o.max_batched_tokens >= 0, "--max-batched-tokens must be positive");
    int budget = o.max_batched_tokens ? o.max_batched_tokens : (cpu ? 512 : 8192);
    budget = std::max(budget, max_seqs_);
    const int64_t kv_elem = int64_t(dtype_info(backend_->act_dtype()).block_bytes);
    const int64_t per_token = cfg.kv_bytes_per_token(kv_elem);
    int64_t kv_tokens = o.kv_tokens;
    LL_CHECK(kv_tokens >= 0, "--kv-tokens must be positive");
    if (kv_tokens == 0) {
      // Enough for every sequence at full context, capped (2 GiB on the CPU).
      const int64_t cap = std::max<int64_t>(ctx_, (int64_t(2) << 30) / per_token);
      kv_tokens = std::min<int64_t>(int64_t(max_seqs_) * ctx_, cap);
    }
    LL_CHECK(kv_tokens <= std::numeric_limits<int32_t>::max(), "--kv-tokens too large");
    if (kv_tokens < ctx_) {
      // A sequence longer than the pool could never be re-admitted after preemption.
      LL_WARN("--kv-tokens {} is below the context {}: the context is reduced to {}", kv_tokens,
              ctx_, kv_tokens);
      ctx_ = int(kv_tokens);
    }
    kv_ = std::make_unique<KvCache>(cfg, *backend_, kv_tokens, max_seqs_, ctx_);
    decoder_ = std::make_unique<Decoder>(cfg, std::move(weights), *backend_, *kv_, budget, max_seqs_);
    pool_ = std::make_unique<kv::KvPool>(int32_t(kv_tokens));
    rows_ = std::make_unique<kv::ReqRows>(max_seqs_);
    sched_ = std::make_unique<Scheduler>(SchedulerConfig{max_seqs_, budget, ctx_}, *pool_, *rows_);
    host_logits_.resize(size_t(max_seqs_) * size_t(cfg.vocab_size));
    stop_ids_ = files_.tokenizer->stop_ids();
    fill_info(o, per_token, kv_tokens, now_ms() - t0);
    LL_INFO("loaded {} ({}, {}) on {} in {:.0f} ms", info_.name, info_.arch, info_.weight_dtype,
            info_.backend, info_.load_ms);
    LL_INFO("memory: weights {:.1f} MB, KV {:.1f} MB ({} slots x {} B), activations {:.1f} MB",
            double(info_.weight_bytes) / kMiB, double(info_.kv_bytes) / kMiB, kv_tokens,
            per_token, double(info_.activation_bytes) / kMiB);
  }

  std::vector<int32_t> tokenize(std::string_view text, bool add_special,
                                bool parse_special) const override {
    return files_.tokenizer->encode(text, add_special, parse_special);
  }
  std::string detokenize(const std::vector<int32_t>& ids) const override {
    return files_.tokenizer->decode(ids, false);
  }
  std::string token_text(int32_t id) const override {
    LL_CHECK(id >= 0 && id < files_.tokenizer->vocab_size(), "token id {} out of range", id);
    return files_.tokenizer->token_text(id);
  }

  std::string apply_chat_template(const std::vector<ChatMessage>& msgs, bool add_generation_prompt,
                                  const std::string& extra_json) const override {
    LL_CHECK(!files_.chat_template.empty(), "{}: the model has no chat template", files_.path);
    std::call_once(template_once_, [&] { template_ = std::make_unique<ChatTemplate>(files_.chat_template); });
    nlohmann::ordered_json ctx = nlohmann::ordered_json::object();
    if (!extra_json.empty()) {
      nlohmann::ordered_json extra = nlohmann::ordered_json::parse(extra_json, nullptr, false);
      LL_CHECK(extra.is_object(), "chat template variables must be a JSON object");
      ctx = extra;
    }
    nlohmann::ordered_json messages = nlohmann::ordered_json::array();
    for (const ChatMessage& m : msgs) {
      nlohmann::ordered_json j = {{"role", m.role}, {"content", m.content}};
      if (!m.reasoning_content.empty()) j["reasoning_content"] = m.reasoning_content;
      messages.push_back(std::move(j));
    }
    ctx["messages"] = std::move(messages);
    ctx["add_generation_prompt"] = add_generation_prompt;
    ctx["bos_token"] = files_.bos_token;
    ctx["eos_token"] = files_.eos_token;
    return template_->render(ctx);
  }

  int64_t add_request(std::vector<int32_t> prompt, const SamplingParams& p) override {
    p.validate();
    LL_CHECK(!prompt.empty(), "the prompt is empty");
    const int n = int(prompt.size());
    LL_CHECK(n < ctx_, "prompt of {} tokens is longer than the context of {} tokens (--ctx)", n,
             ctx_);
    LL_CHECK(n < pool_->num_slots(), "prompt of {} tokens does not fit the KV pool of {} slots", n,
             pool_->num_slots());
    for (int32_t t : prompt)
      LL_CHECK(t >= 0 && t < files_.config.vocab_size, "prompt token id {} out of range", t);
    const int64_t id = next_id_++;
    auto r = std::make_unique<Request>(id, std::move(prompt), p, *files_.tokenizer);
    sched_->add(&r->seq);
    requests_.emplace(id, std::move(r));
    return id;
  }

  void cancel(int64_t id) override {
    if (requests_.count(id)) cancelled_.push_back(id);
  }

  bool has_unfinished() const override { return !requests_.empty(); }
  const ModelInfo& info() const override { return info_; }
  EngineStats stats() const override {
    EngineStats s;
    s.running = sched_->num_running();
    s.waiting = sched_->num_waiting();
    s.kv_slots_total = pool_->num_slots();
    s.kv_slots_used = pool_->num_used();
    s.preemptions = sched_->num_preemptions();
    return s;
  }

  std::vector<RequestOutput> step() override {
    std::vector<RequestOutput> outs;
    for (int64_t id : cancelled_) {
      auto it = requests_.find(id);
      if (it == requests_.end()) continue;
      RequestOutput o = base_output(*it->second);
      o.finished = true;
      o.finish_reason = FinishReason::Cancelled;
      sched_->finish(&it->second->seq);
      requests_.erase(it);
      outs.push_back(std::move(o));
    }
    cancelled_.clear();

    StepPlan plan = sched_->schedule();
    if (plan.empty()) return outs;
    batch_.clear();
    for (const ScheduledSeq& it : plan.items) {
      Sequence* s = it.seq;
      batch_.add_sequence(s->req_row, s->tokens.data() + s->num_computed, it.num_tokens,
                          s->num_computed, s->slots.data() + s->num_computed, it.sample);
    }
    Tensor logits = decoder_->forward(batch_);
    const int64_t V = files_.config.vocab_size;
    const float* lg = logits.ptr<float>();
    if (logits.device != Device::CPU) {
      backend_->copy_to_host(host_logits_.data(), logits.data, logits.nbytes());
      lg = host_logits_.data();
    }
    sched_->commit(plan);

    // Embedding rows past the tokenizer's vocabulary are padding: never sample them.
    const int64_t tok_vocab = files_.tokenizer->vocab_size();
    int row = 0;
    for (const ScheduledSeq& it : plan.items) {
      if (!it.sample) continue;
      float* l = const_cast<float*>(lg) + int64_t(row++) * V;
      for (int64_t i = tok_vocab; i < V; ++i) l[i] = -std::numeric_limits<float>::infinity();
      Request& r = *requests_.at(it.seq->id);
      outs.push_back(sample_one(r, l, tok_vocab));
      if (outs.back().finished) {
        sched_->finish(&r.seq);
        requests_.erase(it.seq->id);
      }
    }
    return outs;
  }

 private:
  RequestOutput base_output(const Request& r) const {
    RequestOutput o;
    o.id = r.seq.id;
    o.prompt_tokens = r.seq.num_prompt;
    o.completion_tokens = r.seq.num_generated();
    return o;
  }

  RequestOutput sample_one(Request& r, float* logits, int64_t vocab) {
    float lp = 0;
    std::vector<sampling::TokenLogprob> top;
    const bool want_lp = r.params.top_logprobs >= 0;
    int32_t tok = r.sampler.sample(logits, vocab, want_lp ? &lp : nullptr, want_lp ? &top : nullptr);
    r.sampler.accept(tok);
    r.seq.tokens.push_back(tok);
    RequestOutput o = base_output(r);
    o.tokens.push_back(tok);
    if (want_lp) {
      TokenLogprobs tl;
      tl.token = tok;
      tl.logprob = lp;
      for (const auto& t : top) tl.top.emplace_back(t.token, t.logprob);
      o.logprobs.push_back(std::move(tl));
    }
    const auto& sp = r.params;
    const bool eos = !sp.ignore_eos && std::find(stop_ids_.begin(), stop_ids_.end(), tok) != stop_ids_.end();
    const bool stop_id = std::find(sp.stop_token_ids.begin(), sp.stop_token_ids.end(), tok) != sp.stop_token_ids.end();
    if (eos || stop_id) {
      o.text = r.text.flush();
      o.finished = true;
      o.finish_reason = FinishReason::Stop;
      return o;
    }
    bool stopped = false;
    o.text = r.text.push(tok, &stopped);
    if (stopped) {
      o.finished = true;
      o.finish_reason = FinishReason::Stop;
    } else if (r.seq.num_generated() >= sp.max_tokens || r.seq.num_tokens() >= ctx_) {
      o.text += r.text.flush();
      o.finished = true;
      o.finish_reason = FinishReason::Length;
    }
    return o;
  }

  void fill_info(const EngineOptions& o, int64_t per_token, int64_t kv_tokens, double ms) {
    const ModelConfig& c = files_.config;
    ModelInfo& i = info_;
    i.path = files_.path;
    i.name = c.name;
    i.arch = c.arch;
    i.format = files_.format;
    i.weight_dtype = files_.weight_dtype;
    i.rope_scaling = rope_scaling_name(c.rope_scaling);
    i.device = device_name(backend_->device());
    i.backend = backend_->name();
    i.params = count_parameters(c);
    i.vocab_size = c.vocab_size;
    i.hidden_size = c.hidden_size;
    i.num_layers = c.num_layers;
    i.num_heads = c.num_heads;
    i.num_kv_heads = c.num_kv_heads;
    i.head_dim = c.head_dim;
    i.intermediate_size = c.intermediate_size;
    i.context_length = c.max_position_embeddings;
    i.rope_theta = c.rope_theta;
    i.tied_embeddings = c.tie_word_embeddings;
    i.qkv_bias = c.qkv_bias;
    i.qk_norm = c.qk_norm;
    i.kv_bytes_per_token = per_token;
    i.ctx = ctx_;
    i.kv_slots = kv_tokens;
    i.max_num_seqs = max_seqs_;
    i.load_ms = ms;
    i.weight_bytes = decoder_->weights().device_bytes;
    i.kv_bytes = kv_->bytes();
    i.activation_bytes = decoder_->activation_bytes();
    const Tokenizer& t = *files_.tokenizer;
    auto add = [&](const char* name, int32_t id) {
      if (id >= 0) i.special_tokens.emplace_back(name, id);
    };
    add("bos", t.bos_id());
    add("eos", t.eos_id());
    add("eot", t.eot_id());
    add("pad", t.pad_id());
    i.stop_ids = t.stop_ids();
    (void)o;
  }

  ModelFiles files_;
  std::unique_ptr<ops::Backend> backend_;
  std::unique_ptr<KvCache> kv_;
  std::unique_ptr<Decoder> decoder_;
  std::unique_ptr<kv::KvPool> pool_;
  std::unique_ptr<kv::ReqRows> rows_;
  std::unique_ptr<Scheduler> sched_;
  mutable std::once_flag template_once_;
  mutable std::unique_ptr<ChatTemplate> template_;
  std::unordered_map<int64_t, std::unique_ptr<Request>> requests_;
  std::vector<int64_t> cancelled_;
  std::vector<int32_t> stop_ids_;
  std::vector<float> host_logits_;
  ForwardBatch batch_;
  ModelInfo info_;
  int ctx_ = 0, max_seqs_ = 0;
  int64_t next_id_ = 1;
};

}  // namespace

std::unique_ptr<Engine> Engine::create(const EngineOptions& opts) {
  return std::make_unique<EngineImpl>(opts);
}

}  // namespace lite_llama

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
#include "engine/score.h"
#include "engine/text_stream.h"
#include "kv/kv_pool.h"
#include "model/decoder.h"
#include "model/kv_cache.h"
#include "sampling/sampler.h"
#include "template/chat_template.h"

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
    backend_ = make_backend({o.device, o.threads, o.dtype, o.quantize});
    const bool cpu = backend_->device() == Device::CPU;
    LL_CHECK(cpu || cfg.head_dim == 64 || cfg.head_dim == 128,
             "{}: head_dim {} is not supported by the CUDA attention kernels (64, 128); use --device cpu",
             files_.path, cfg.head_dim);
    Weights weights = load_weights(cfg, *files_.weights, *backend_);
    // What the device computes with, where it differs from the file (GQ layouts, 16-bit).
    if (!weights.layers.empty() && !cpu) {
      const std::string dev(dtype_name(weights.layers[0].gate_up.parts[0].dtype));
      if (dev != files_.weight_dtype) files_.weight_dtype += " -> " + dev;
    }

    LL_CHECK(o.ctx >= 0, "--ctx must be positive, got {}", o.ctx);
    LL_CHECK(o.ctx <= cfg.max_position_embeddings,
             "--ctx {} exceeds the model's context length {}", o.ctx, cfg.max_position_embeddings);
    ctx_ = o.ctx ? o.ctx : int(std::min<int64_t>(cfg.max_position_embeddings, 8192));
    LL_CHECK(o.max_num_seqs >= 0 && o.max_num_seqs <= 4096, "--max-num-seqs must be in 1..4096");
    max_seqs_ = o.max_num_seqs ? o.max_num_seqs : (cpu ? 16 : 256);
    LL_CHECK(o.max_batched_tokens >= 0, "--max-batched-tokens must be positive");
    int budget = o.max_batched_tokens ? o.max_batched_tokens : (cpu ? 512 : 8192);
    budget = std::max(budget, max_seqs_);
    decoder_ = std::make_unique<Decoder>(cfg, std::move(weights), *backend_, budget, max_seqs_, ctx_);
    const int64_t kv_elem = int64_t(dtype_info(backend_->act_dtype()).block_bytes);
    const int64_t per_token = cfg.kv_bytes_per_token(kv_elem);
    int64_t kv_tokens = o.kv_tokens;
    LL_CHECK(kv_tokens >= 0, "--kv-tokens must be positive");
    LL_CHECK(o.gpu_memory_utilization > 0 && o.gpu_memory_utilization <= 1,
             "--gpu-memory-utilization must be in (0, 1], got {}", o.gpu_memory_utilization);
    if (kv_tokens == 0) {
      // Enough for every sequence at full context, capped by memory: 2 GiB on the CPU, the
      // --gpu-memory-utilization share of what is free after weights and buffers on a GPU.
      int64_t cap = (int64_t(2) << 30) / per_token;
      if (backend_->device() == Device::CUDA) {
        size_t free = 0, total = 0;
        backend_->memory_info(&free, &total);
        const double graph_reserve = 256.0 * (1 << 20);  // graphs, cuBLAS, fragmentation
        cap = int64_t((double(free) * o.gpu_memory_utilization - graph_reserve) / double(per_token));
        LL_CHECK(cap >= 16, "not enough GPU memory left for the KV cache ({:.0f} MiB free)",
                 double(free) / kMiB);
      }
      kv_tokens = std::min<int64_t>(int64_t(max_seqs_) * ctx_, std::max<int64_t>(cap, 16));
    }
    LL_CHECK(kv_tokens <= std::numeric_limits<int32_t>::max(), "--kv-tokens too large");
    if (kv_tokens < ctx_) {
      // A sequence longer than the pool could never be re-admitted after preemption.
      LL_WARN("the KV pool holds {} tokens, below the context {}: the context is reduced to {}",
              kv_tokens, ctx_, kv_tokens);
      ctx_ = int(kv_tokens);
    }
    kv_ = std::make_unique<KvCache>(cfg, *backend_, kv_tokens, max_seqs_, ctx_);
    decoder_->set_kv_cache(kv_.get());
    pool_ = std::make_unique<kv::KvPool>(int32_t(kv_tokens));
    rows_ = std::make_unique<kv::ReqRows>(max_seqs_);
    sched_ = std::make_unique<Scheduler>(SchedulerConfig{max_seqs_, budget, ctx_}, *pool_, *rows_);
    host_logits_.resize(size_t(max_seqs_) * size_t(cfg.vocab_size));
    host_tokens_.resize(size_t(max_seqs_));
    device_tokens_ = backend_->alloc(size_t(max_seqs_) * sizeof(int32_t));
    // Penalty entries of one step: distinct tokens per sequence, bounded by its length.
    backend_->reserve_sampling(max_seqs_, int(std::min<int64_t>(int64_t(max_seqs_) * ctx_, 1 << 22)));
    stop_ids_ = files_.tokenizer->stop_ids();
    sample_limit_ = int(std::min<int64_t>(cfg.vocab_size, files_.tokenizer->vocab_size()));
    const double t_graph = now_ms();
    if (o.cuda_graph && backend_->supports_graphs()) capture_graphs();
    graph_ms_ = now_ms() - t_graph;
    fill_info(o, per_token, kv_tokens, now_ms() - t0);
    LL_INFO("loaded {} ({}, {}) on {} in {:.0f} ms", info_.name, info_.arch, info_.weight_dtype,
            info_.backend, info_.load_ms);
    LL_INFO("memory: weights {:.1f} MB, KV {:.1f} MB ({} slots x {} B), activations {:.1f} MB, "
            "{} CUDA graphs captured in {:.0f} ms",
            double(info_.weight_bytes) / kMiB, double(info_.kv_bytes) / kMiB, kv_tokens,
            per_token, double(info_.activation_bytes) / kMiB, graphs_.size(), graph_ms_);
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
    nlohmann::ordered_json extra = nlohmann::ordered_json::object();
    if (!extra_json.empty()) {
      extra = nlohmann::ordered_json::parse(extra_json, nullptr, false);
      LL_CHECK(extra.is_object(), "chat template variables must be a JSON object");
    }
    return lite_llama::apply_chat_template(*template_, msgs, add_generation_prompt, files_.bos_token,
                                           files_.eos_token, extra);
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

  void set_profiling(bool on) override {
    profiling_ = on;
    backend_->set_profiling(on);
  }
  std::vector<ProfileRow> profile_report() override {
    std::vector<ProfileRow> out;
    for (const auto& e : backend_->profile_report()) out.push_back({e.family, e.ms, e.calls});
    return out;
  }

  std::vector<ScoreResult> score(const std::vector<std::vector<int32_t>>& seqs, int decode_tail,
                                 const LogitsSink& sink) override {
    LL_CHECK(requests_.empty(), "score() needs an idle engine");
    for (const auto& s : seqs) {
      LL_CHECK(int(s.size()) <= ctx_, "a sequence of {} tokens is longer than the context {}",
               s.size(), ctx_);
      for (int32_t t : s) LL_CHECK(t >= 0 && t < sample_limit_, "token id {} out of range", t);
    }
    ScoreContext c{*decoder_, *pool_, *rows_, decoder_->max_tokens(), max_seqs_, sample_limit_};
    return score_sequences(c, seqs, decode_tail, sink);
  }
  const ModelInfo& info() const override { return info_; }
  EngineStats stats() const override {
    EngineStats s;
    s.running = sched_->num_running();
    s.waiting = sched_->num_waiting();
    s.kv_slots_total = pool_->num_slots();
    s.kv_slots_used = pool_->num_used();
    s.preemptions = sched_->num_preemptions();
    backend_->memory_info(&s.device_free, &s.device_total);
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
    bool decode_only = true, greedy = true;
    for (const ScheduledSeq& it : plan.items) {
      Sequence* s = it.seq;
      batch_.add_sequence(s->req_row, s->tokens.data() + s->num_computed, it.num_tokens,
                          s->num_computed, s->slots.data() + s->num_computed, it.sample);
      decode_only = decode_only && it.num_tokens == 1 && it.sample;
      if (it.sample) greedy = greedy && is_greedy(requests_.at(s->id)->params);
    }
    const int n_real = int(batch_.logit_rows.size());
    const int64_t V = files_.config.vocab_size;
    Tensor logits;
    const int bucket = decode_only && !profiling_ ? graph_bucket(batch_.num_seqs()) : -1;
    if (bucket >= 0) {
      // Pad to the captured batch size by repeating the last sequence: the copies write the
      // same K/V to the same slot and their logits are ignored.
      while (batch_.num_seqs() < graph_sizes_[size_t(bucket)]) {
        const int last = batch_.num_seqs() - 1;
        const int32_t tok = batch_.t_token_ids.back(), slot = batch_.t_slots.back();
        batch_.add_sequence(batch_.b_req_idx[size_t(last)], &tok, 1, batch_.t_positions.back(), &slot, true);
      }
      decoder_->stage(batch_);
      backend_->replay_graph(graphs_[size_t(bucket)]);  // forward + argmax
      logits = decoder_->logits_buffer();
    } else {
      logits = decoder_->forward(batch_);
      if (greedy) backend_->argmax(logits, n_real, sample_limit_, device_tokens_.as<int32_t>());
    }
    // Token selection: argmax on the device (in the graph); otherwise the device sampler unless a
    // request wants logprobs (computed on the host from the full distribution).
    bool on_device = greedy;
    if (!greedy && backend_->supports_device_sampling()) {
      std::vector<ops::SampleRow> rows;
      std::vector<int32_t> pen_tokens, pen_counts;
      bool logprobs = false;
      for (const ScheduledSeq& it : plan.items) {
        if (!it.sample) continue;
        const Request& r = *requests_.at(it.seq->id);
        const SamplingParams& p = r.params;
        logprobs = logprobs || p.top_logprobs >= 0;
        ops::SampleRow row;
        row.temperature = p.temperature;
        row.top_p = p.top_p;
        row.min_p = p.min_p;
        row.top_k = p.top_k;
        row.repetition_penalty = p.repetition_penalty;
        row.presence_penalty = p.presence_penalty;
        row.frequency_penalty = p.frequency_penalty;
        row.seed = r.sampler.seed();
        row.counter = uint64_t(r.seq.num_generated());
        row.pen_offset = int(pen_tokens.size());
        r.sampler.penalty_entries(pen_tokens, pen_counts);
        row.pen_count = int(pen_tokens.size()) - row.pen_offset;
        rows.push_back(row);
      }
      on_device = !logprobs && backend_->sample(logits, n_real, sample_limit_, rows, pen_tokens, pen_counts,
                                                device_tokens_.as<int32_t>());
    }
    const float* lg = nullptr;
    if (on_device) {
      backend_->copy_to_host(host_tokens_.data(), device_tokens_.data(), size_t(n_real) * sizeof(int32_t));
    } else if (logits.device != Device::CPU) {
      backend_->copy_to_host(host_logits_.data(), logits.data, size_t(n_real) * size_t(V) * sizeof(float));
      lg = host_logits_.data();
    } else {
      lg = logits.ptr<float>();
    }
    sched_->commit(plan);

    int row = 0;
    for (const ScheduledSeq& it : plan.items) {
      if (!it.sample) continue;
      Request& r = *requests_.at(it.seq->id);
      if (on_device) {
        outs.push_back(accept_token(r, host_tokens_[size_t(row++)], 0.f, {}));
      } else {
        float* l = const_cast<float*>(lg) + int64_t(row++) * V;
        // Embedding rows past the tokenizer's vocabulary are padding: never sample them.
        for (int64_t i = sample_limit_; i < V; ++i) l[i] = -std::numeric_limits<float>::infinity();
        outs.push_back(sample_one(r, l, sample_limit_));
      }
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

  static bool is_greedy(const SamplingParams& p) {
    return p.temperature == 0.0f && p.top_logprobs < 0 && p.repetition_penalty == 1.0f &&
           p.presence_penalty == 0.0f && p.frequency_penalty == 0.0f;
  }

  RequestOutput sample_one(Request& r, float* logits, int64_t vocab) {
    float lp = 0;
    std::vector<sampling::TokenLogprob> top;
    const bool want_lp = r.params.top_logprobs >= 0;
    int32_t tok = r.sampler.sample(logits, vocab, want_lp ? &lp : nullptr, want_lp ? &top : nullptr);
    if (!want_lp) return accept_token(r, tok, 0.f, {});
    TokenLogprobs tl;
    tl.token = tok;
    tl.logprob = lp;
    for (const auto& t : top) tl.top.emplace_back(t.token, t.logprob);
    return accept_token(r, tok, lp, {std::move(tl)});
  }

  // Appends the chosen token and decides whether the request is finished.
  RequestOutput accept_token(Request& r, int32_t tok, float, std::vector<TokenLogprobs> lps) {
    r.sampler.accept(tok);
    r.seq.tokens.push_back(tok);
    RequestOutput o = base_output(r);
    o.tokens.push_back(tok);
    o.logprobs = std::move(lps);
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

  // CUDA graphs of the decode step (forward + argmax), one per batch-size bucket; lengths live
  // in device memory, so each graph serves every context length.
  void capture_graphs() {
    for (int b : {1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 160, 192, 224, 256, 320, 384, 448, 512})
      if (b <= max_seqs_) graph_sizes_.push_back(b);
    if (graph_sizes_.empty() || graph_sizes_.back() != max_seqs_) graph_sizes_.push_back(max_seqs_);
    for (int b : graph_sizes_) {
      StepShape shape;
      shape.num_tokens = shape.num_seqs = shape.num_logits = shape.num_decode_seqs = b;
      shape.max_q_len = 1;
      shape.max_seq_len = ctx_;  // fixes the flash-decoding split count for this bucket
      graphs_.push_back(backend_->capture_graph([&] {
        Tensor logits = decoder_->run(shape);
        backend_->argmax(logits, b, sample_limit_, device_tokens_.as<int32_t>());
      }));
    }
  }

  int graph_bucket(int num_seqs) const {
    for (size_t i = 0; i < graph_sizes_.size(); ++i)
      if (graph_sizes_[i] >= num_seqs) return int(i);
    return -1;
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
  std::vector<int32_t> host_tokens_;
  Buffer device_tokens_;
  int sample_limit_ = 0;
  std::vector<int> graph_sizes_, graphs_;
  double graph_ms_ = 0;
  bool profiling_ = false;
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

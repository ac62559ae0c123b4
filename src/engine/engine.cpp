// Engine: ties model files, backend, KV pool, scheduler and the step runner together, and keeps
// the requests (sampling state, text, stop conditions).
#include "lite_llama/engine.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <functional>
#include <future>
#include <optional>
#include <thread>
#include <atomic>
#include <unordered_map>
#include <utility>

#include "backends/factory.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "core/log.h"
#include "core/timer.h"
#include "engine/chat_prompt.h"
#include "engine/engine_setup.h"
#include "engine/model_files.h"
#include "engine/act_calibration.h"
#include "engine/runner.h"
#include "engine/scheduler.h"
#include "engine/score.h"
#include "engine/text_stream.h"
#include "kv/kv_pool.h"
#include "kv/radix_cache.h"
#include "engine/grammar_cache.h"
#include "sampling/bad_words.h"
#include "sampling/sampler.h"

namespace lite_llama {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;

struct Request {
  Request(int64_t id, std::vector<int32_t> prompt, const SamplingParams& p, const Tokenizer& tok)
      : params(p), sampler(p, prompt), text(tok, p.stop, p.include_stop_str_in_output, p.skip_special_tokens) {
    seq.id = id;
    seq.num_prompt = int(prompt.size());
    seq.tokens = std::move(prompt);
  }
  SamplingParams params;
  Sequence seq;
  sampling::SequenceSampler sampler;
  TextStream text;
  std::shared_ptr<const grammar::CompiledGrammar> grammar;  // null: unconstrained
  std::optional<grammar::Matcher> matcher;                  // the output so far, in the grammar
  std::shared_future<void> warmed;  // the grammar's mask-cache warm-up is over (GrammarCache)
  std::vector<TokenLogprobs> prompt_lps;  // params.prompt_logprobs: scored, not yet sent
  std::vector<uint32_t> allow_mask;       // params.allowed_token_ids as mask bits; empty: all
  std::vector<std::vector<int32_t>> bad_words;  // params.bad_words, tokenized
};

class EngineImpl final : public Engine {
 public:
  explicit EngineImpl(const EngineOptions& o) {
    const double t0 = now_ms();
    LL_CHECK(o.load_format == "auto" || o.load_format == "dummy",
             "--load-format must be auto or dummy, got '{}'", o.load_format);
    files_ = o.load_format == "dummy" ? open_dummy_model(o.model, o.dummy_seed)
                                      : open_model_files(o.model);
    // Before the weights: a --chat-template that does not parse fails the start at once.
    templates_ = std::make_unique<ChatTemplates>(files_.chat_template, o.chat_template, files_.path,
                                                 files_.bos_token, files_.eos_token);
    load_backend_and_model(o);
    pool_ = std::make_unique<kv::KvPool>(int32_t(model().kv_tokens));
    rows_ = std::make_unique<kv::ReqRows>(model().max_seqs);
    if (o.prefix_cache) cache_ = std::make_unique<kv::RadixCache>(*pool_);
    sched_ = std::make_unique<Scheduler>(
        SchedulerConfig{model().max_seqs, model().max_batched_tokens, model().ctx, o.max_prefill_with_decodes},
        *pool_, *rows_, cache_.get());
    const int64_t vocab = std::min<int64_t>(files_.config.vocab_size, files_.tokenizer->vocab_size());
    runner_ = std::make_unique<Runner>(ranks_->decoders(), ranks_->group(), model().ctx, int(vocab));
    GrammarWarmOptions warm;
    warm.threads = o.grammar_warm_threads;
    warm.budget.max_ms = o.grammar_warm_ms;
    if (o.grammar_warm_ms <= 0) warm.threads = -1;
    grammars_ = std::make_unique<GrammarCache>(*files_.tokenizer, int(vocab), warm);
    stop_ids_ = files_.tokenizer->stop_ids();
    const double t_graph = now_ms();
    if (o.cuda_graph) runner_->capture_graphs();
    const double graph_ms = now_ms() - t_graph;
    info_ = make_model_info(files_, backend(), model(), now_ms() - t0);
    LL_INFO("loaded {} ({}, {}) on {} in {:.0f} ms", info_.name, info_.arch, info_.weight_dtype,
            info_.backend, info_.load_ms);
    // On the CPU the KV pool is reserved address space: its pages become resident as slots fill
    // (lowest slots first), and GGUF weights are the file's mmap, resident as they are read.
    const bool cpu = backend().device() == Device::CPU;
    LL_INFO("memory: weights {:.1f} MB{}, KV {:.1f} MB ({} slots x {} B{}), activations {:.1f} MB, "
            "{} CUDA graphs captured in {:.0f} ms",
            double(info_.weight_bytes) / kMiB, cpu ? " (mapped file or converted copy)" : "",
            double(info_.kv_bytes) / kMiB, model().kv_tokens, model().kv_bytes_per_token,
            cpu ? "; reserved, resident as slots fill" : "", double(info_.activation_bytes) / kMiB,
            runner_->num_graphs(), graph_ms);
  }

  // --dtype auto on a GPU: fp16 where a calibration forward shows the activations fit its range,
  // else the model is loaded again with bf16.
  void load_backend_and_model(const EngineOptions& o) {
    BackendOptions bo = o.backend;
    const bool pick = bo.dtype == ActType::Auto;
    if (pick) bo.dtype = ActType::FP16;
    const std::string file_dtype = files_.weight_dtype;  // load_model appends the device's
    ranks_ = std::make_unique<RankModels>(o, bo, files_);
    if (!pick || backend().device() != Device::CUDA) return;
    // Every rank runs the calibration forward (their collectives pair up); the widest range counts.
    std::vector<double> ranges(size_t(ranks_->size()), 0.0);
    ranks_->group().run([&](int r) {
      ranges[size_t(r)] = calibration_activation_range(*ranks_->model(r).decoder, *files_.tokenizer);
    });
    const double range = *std::max_element(ranges.begin(), ranges.end());
    if (range < kFp16SafeRange) {
      LL_INFO("activations: fp16 (largest |activation| {:.1f} on the calibration text; --dtype bf16 overrides)", range);
      return;
    }
    LL_INFO("activations: bf16 (largest |activation| {:.3g} on the calibration text, above fp16's safe {:.0f})",
            range, kFp16SafeRange);
    ranks_.reset();
    bo.dtype = ActType::BF16;
    files_.weight_dtype = file_dtype;
    ranks_ = std::make_unique<RankModels>(o, bo, files_);
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
                                  const std::string& extra_json, bool continue_final,
                                  const std::string& chat_template) const override {
    return templates_->render(msgs, add_generation_prompt, extra_json, continue_final, chat_template);
  }

  std::vector<int32_t> tokenize_chat(const std::vector<ChatMessage>& msgs, bool add_generation_prompt,
                                     const std::string& extra_json, bool allow_special, std::string* text,
                                     bool continue_final, const std::string& chat_template) const override {
    return tokenize_chat_prompt(*files_.tokenizer, msgs, allow_special, [&](const auto& m) {
      return templates_->render(m, add_generation_prompt, extra_json, continue_final, chat_template);
    }, text);
  }

  int64_t add_request(std::vector<int32_t> prompt, const SamplingParams& p) override {
    p.validate();
    LL_CHECK(!prompt.empty(), "the prompt is empty");
    const int n = int(prompt.size());
    // A prompt must leave room for one new token.
    LL_CHECK(n < model().ctx, "prompt of {} tokens {} the context of {} tokens (--ctx){}", n,
             n > model().ctx ? "is longer than" : "fills", model().ctx,
             n > model().ctx ? "" : ": no room for a new token");
    LL_CHECK(n < pool_->num_slots(), "prompt of {} tokens does not fit the KV pool of {} slots", n,
             pool_->num_slots());
    for (int32_t t : prompt)
      LL_CHECK(t >= 0 && t < files_.config.vocab_size, "prompt token id {} out of range", t);
    const int limit = runner_->sample_limit();
    for (const auto& [t, b] : p.logit_bias) LL_CHECK(t < limit, "logit_bias token id {} out of range", t);
    std::vector<uint32_t> allow;
    if (p.allowed_token_ids) {
      allow.assign(grammars_->mask_words(), 0);
      for (int32_t t : *p.allowed_token_ids) {
        LL_CHECK(t < limit, "allowed_token_ids holds token id {}, out of range (vocabulary of {})", t, limit);
        allow[size_t(t) / 32] |= 1u << (uint32_t(t) % 32);
      }
    }
    auto bad = sampling::tokenize_bad_words(p.bad_words, [&](const std::string& w) {
      return files_.tokenizer->encode(w, false, false);
    });
    for (const auto& w : bad)
      for (int32_t t : w) LL_CHECK(t < limit, "bad_words tokenize to token id {}, out of range", t);
    std::shared_ptr<const grammar::CompiledGrammar> g;
    std::shared_future<void> warmed;
    if (!p.grammar.empty()) g = grammars_->get(p.grammar, &warmed);  // throws on a bad grammar
    const int64_t id = next_id_++;
    auto r = std::make_unique<Request>(id, std::move(prompt), greedy_below_eps(p), *files_.tokenizer);
    r->allow_mask = std::move(allow);
    r->bad_words = std::move(bad);
    if (g) {
      r->grammar = std::move(g);
      r->matcher.emplace(r->grammar->matcher());
      r->warmed = std::move(warmed);
    }
    // Prompt logprobs are scored at the next step (score_prompts), before the request is queued.
    if (r->params.prompt_logprobs >= 0)
      scoring_.push_back(r.get());
    else
      admit(r.get());
    requests_.emplace(id, std::move(r));
    return id;
  }

  void cancel(int64_t id) override {
    if (requests_.count(id)) cancelled_.push_back(id);
  }

  bool has_unfinished() const override { return !requests_.empty(); }

  void set_profiling(bool on) override {
    runner_->set_profiling(on);
    backend().set_profiling(on);
  }
  std::vector<ProfileRow> profile_report() override {
    std::vector<ProfileRow> out;
    for (const auto& e : backend().profile_report()) out.push_back({e.family, e.ms, e.calls});
    return out;
  }

  std::vector<ScoreResult> score(const std::vector<std::vector<int32_t>>& seqs, int decode_tail,
                                 const LogitsSink& sink, int top_logprobs) override {
    LL_CHECK(requests_.empty(), "score() needs an idle engine");
    if (cache_) cache_->reset();  // scoring takes slots from the pool directly
    return score_now(seqs, decode_tail, sink, top_logprobs);
  }
  // Scores on the calling (stepping) thread with request rows and KV slots of its own, given back
  // before it returns: the running requests' rows, slots and tables stay untouched.
  std::vector<ScoreResult> score_now(const std::vector<std::vector<int32_t>>& seqs, int decode_tail,
                                     const LogitsSink& sink, int top_logprobs,
                                     std::function<void(size_t, std::vector<int32_t>&)> on_scored = {}) {
    LL_CHECK(top_logprobs >= -1 && top_logprobs <= 20, "top_logprobs must be in [0, 20], got {}", top_logprobs);
    const int limit = runner_->sample_limit();
    for (const auto& s : seqs) {
      LL_CHECK(int(s.size()) <= model().ctx, "a sequence of {} tokens is longer than the context {}",
               s.size(), model().ctx);
      for (int32_t t : s) LL_CHECK(t >= 0 && t < limit, "token id {} out of range", t);
    }
    Decoder& d = *model().decoder;
    ScoreContext c{d, [this](const ForwardBatch& b) { return runner_->forward_all(b); },
                   [this](int first, int n) { return runner_->token_logits_all(first, n); }, *pool_, *rows_,
                   d.max_tokens(), model().max_seqs, limit, std::move(on_scored)};
    return score_sequences(c, seqs, decode_tail, sink, top_logprobs);
  }
  const ModelInfo& info() const override { return info_; }
  EngineStats stats() const override {
    EngineStats s;
    s.running = sched_->num_running();
    s.waiting = sched_->num_waiting() + int(warming_.size()) + int(scoring_.size());
    s.kv_slots_total = pool_->num_slots();
    // Slots only the prefix cache holds are free to evict: not in use by any request.
    s.kv_slots_used = pool_->num_used() - (cache_ ? cache_->num_unheld() : 0);
    s.preemptions = sched_->num_preemptions();
    if (cache_) {
      s.prefix_cached_tokens = cache_->cached_tokens();
      s.prefix_query_tokens = cache_->stats().queried_tokens;
      s.prefix_hit_tokens = cache_->stats().hit_tokens;
    }
    backend().memory_info(&s.device_free, &s.device_total);
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
      o.prompt_logprobs = std::move(it->second->prompt_lps);
      if (auto w = std::find(warming_.begin(), warming_.end(), it->second.get()); w != warming_.end())
        warming_.erase(w);  // never reached the scheduler
      else if (auto c = std::find(scoring_.begin(), scoring_.end(), it->second.get()); c != scoring_.end())
        scoring_.erase(c);
      else
        sched_->finish(&it->second->seq);
      requests_.erase(it);
      outs.push_back(std::move(o));
    }
    cancelled_.clear();
    score_prompts();
    admit_warmed();
    if (!warming_.empty() && sched_->num_running() == 0 && sched_->num_waiting() == 0) {
      // Nothing else to step: wait for a warm-up here instead of returning at once (a caller
      // looping on step() would spin), but briefly, so that the caller can add new requests.
      warming_.front()->warmed.wait_for(std::chrono::milliseconds(20));
      admit_warmed();
    }

    const double t_sched = now_ms();
    StepPlan plan = sched_->schedule();
    if (plan.empty()) return outs;
    const double t_plan = now_ms();
    samplers_.clear();
    rows_req_.clear();
    for (const ScheduledSeq& it : plan.items) {
      if (!it.sample) continue;
      Request* r = requests_.at(it.seq->id).get();
      samplers_.push_back(&r->sampler);
      rows_req_.push_back(r);
    }
    prepare_constraints();
    const double t_run = now_ms();
    StepResult res = runner_->run(plan, samplers_, &constraints_, [this] { fill_masks(); });
    const double t_ran = now_ms();
    sched_->commit(plan);
    accept_grammars(res);

    size_t row = 0;
    for (const ScheduledSeq& it : plan.items) {
      if (!it.sample) continue;
      Request& r = *requests_.at(it.seq->id);
      const bool dead = !dead_rows_.empty() && dead_rows_[row];
      SampledToken& t = res.rows[row++];
      outs.push_back(dead ? fail_request(r, "grammar: no token can continue the output")
                   : !grammar_ok_[row - 1] ? fail_request(r, grammar_refusal(r, t.token))
                                           : accept_token(r, t.token, std::move(t.logprobs)));
      if (!r.prompt_lps.empty()) outs.back().prompt_logprobs = std::exchange(r.prompt_lps, {});
      if (outs.back().finished) {
        sched_->finish(&r.seq);
        requests_.erase(it.seq->id);
      }
    }
    if (log_level() <= LogLevel::Debug) {
      int n = 0, prefill = 0;
      for (const ScheduledSeq& it : plan.items) n += it.num_tokens, prefill += it.num_tokens > 1;
      LL_DEBUG("step: {} tokens ({} prefills): schedule {:.0f} us, prepare {:.0f} us, run {:.0f} us (masks {:.0f} us), "
               "commit+accept {:.0f} us",
               n, prefill, (t_plan - t_sched) * 1e3, (t_run - t_plan) * 1e3, (t_ran - t_run) * 1e3, fill_us_,
               (now_ms() - t_ran) * 1e3);
    }
    return outs;
  }

 private:
  RequestOutput base_output(const Request& r) const {
    RequestOutput o;
    o.id = r.seq.id;
    o.prompt_tokens = r.seq.num_prompt;
    o.completion_tokens = r.seq.num_generated();
    o.cached_tokens = r.seq.num_cached;
    return o;
  }

  // kGreedyTemperature on every path (the graph's argmax, the host and device samplers).
  static SamplingParams greedy_below_eps(SamplingParams p) {
    if (p.temperature < kGreedyTemperature) p.temperature = 0.0f;
    return p;
  }
  static bool min_tokens_pending(const Request& r) { return r.seq.num_generated() < r.params.min_tokens; }
  // The tokens that end this request: the model's end-of-sequence ids (unless ignore_eos) and its
  // stop_token_ids.
  template <typename F>
  void for_each_stop_token(const Request& r, F&& f) const {
    if (!r.params.ignore_eos)
      for (int32_t t : stop_ids_) f(t);
    for (int32_t t : r.params.stop_token_ids) f(t);
  }

  // The step's logit biases, and room for the grammar masks (filled by fill_masks()).
  void prepare_constraints() {
    constraints_.bias.clear();
    constraints_.words = 0;
    dead_rows_.clear();
    bool any_mask = false;
    for (size_t i = 0; i < rows_req_.size(); ++i) {
      const Request& r = *rows_req_[i];
      any_mask = any_mask || r.matcher.has_value() || !r.allow_mask.empty();
      for (const auto& [t, b] : r.params.logit_bias) constraints_.bias.push_back({int32_t(i), t, b});
      const size_t n_out = size_t(r.seq.num_generated());
      sampling::banned_tokens(r.bad_words, r.seq.tokens.data() + r.seq.num_prompt, n_out, [&](int32_t t) {
        constraints_.bias.push_back({int32_t(i), t, -std::numeric_limits<float>::infinity()});
      });
      if (!r.matcher && min_tokens_pending(r)) {  // no stop token yet (grammar rows: fill_masks)
        constexpr float kNever = -std::numeric_limits<float>::infinity();
        for_each_stop_token(r, [&](int32_t t) { constraints_.bias.push_back({int32_t(i), t, kNever}); });
      }
    }
    if (!any_mask) return;
    constraints_.words = int(grammars_->mask_words());
    // Rows are written by fill_masks (on its threads, while the forward runs): filling 1 MiB
    // here (64 rows of a 128k vocabulary) delayed every constrained step's launch.
    constraints_.masks.resize(rows_req_.size() * size_t(constraints_.words));
  }

  // Runs while the forward is on the device: each constrained row's allowed tokens.
  void fill_masks() {
    fill_us_ = 0;
    if (constraints_.words == 0) return;
    const double t0 = now_ms();
    dead_rows_.assign(rows_req_.size(), 0);
    const size_t w = size_t(constraints_.words);
    auto fill = [&](size_t i) {
      Request& r = *rows_req_[i];
      uint32_t* m = constraints_.masks.data() + i * w;
      if (!r.matcher) {  // no grammar: the allowed tokens, or all
        if (r.allow_mask.empty()) std::fill(m, m + w, ~0u);
        else std::copy(r.allow_mask.begin(), r.allow_mask.end(), m);
        return;
      }
      r.grammar->fill_mask(*r.matcher, m);
      for (size_t k = 0; k < r.allow_mask.size(); ++k) m[k] &= r.allow_mask[k];
      // min_tokens holds the stop tokens back only where the grammar can go on without them: a
      // finished grammar ends the output (masking its one way out failed the request, or sampled
      // tokens outside the grammar).
      if (min_tokens_pending(r)) {
        std::vector<uint32_t> kept(m, m + w);
        for_each_stop_token(r, [&](int32_t t) {
          if (size_t(t) / 32 < w) kept[size_t(t) / 32] &= ~(1u << (uint32_t(t) % 32));
        });
        if (std::any_of(kept.begin(), kept.end(), [](uint32_t x) { return x != 0; })) std::copy(kept.begin(), kept.end(), m);
      }
      dead_rows_[i] = std::all_of(m, m + w, [](uint32_t x) { return x == 0; });
    };
    // Rows differ widely in cost (a cached state is a copy, a new one walks the vocabulary):
    // threads take rows one at a time.
    if (!mask_pool_) {
      const int hw = int(std::thread::hardware_concurrency());
      mask_pool_ = std::make_unique<ThreadPool>(std::clamp(hw / 2, 1, 8));
    }
    std::atomic<size_t> next{0};
    mask_pool_->run([&](int, int) {
      for (size_t i; (i = next.fetch_add(1)) < rows_req_.size();) fill(i);
    });
    fill_us_ = (now_ms() - t0) * 1e3;
  }

  static bool is_warming(const Request& r) {
    return r.warmed.valid() && r.warmed.wait_for(std::chrono::seconds(0)) != std::future_status::ready;
  }

  // add_request runs on the thread that steps (AsyncEngine::loop, the CLI's loops), so a new
  // grammar is not warmed there: that would stall every running request's decode for the
  // warm-up. The request waits outside the scheduler until its grammar's warm-up is over
  // (admit_warmed), and its first token pays the warm-up instead of everyone's decode steps.
  void admit(Request* r) {
    if (is_warming(*r))
      warming_.push_back(r);
    else
      sched_->add(&r->seq);
  }

  // Prompt logprobs: the prompt scored teacher-forced (score_sequences) here, between steps, on a
  // free request row and free KV slots (the prefix cache's unheld slots evicted for them), then
  // the request is admitted. Scoring while requests run is safe only on this thread, and only
  // with resources no request holds; a prompt that does not fit now waits, in arrival order.
  void score_prompts() {
    size_t done = 0;
    for (; done < scoring_.size(); ++done) {
      Request* r = scoring_[done];
      const int n = r->seq.num_prompt;
      if (n >= 2) {
        if (rows_->num_free() == 0) break;
        if (pool_->num_free() < n && cache_) cache_->evict(n - pool_->num_free());
        if (pool_->num_free() < n) break;
        // The scored prompt's K/V go to the prefix cache, so that its admission matches all but the
        // last token instead of computing the prompt again; the usage counts what was cached before.
        std::function<void(size_t, std::vector<int32_t>&)> keep;
        if (cache_) {
          std::vector<int32_t> before;
          r->seq.cache_cap = cache_->match(r->seq.tokens.data(), n - 1, before);
          keep = [&](size_t, std::vector<int32_t>& slots) { cache_->insert(r->seq.tokens.data(), slots.data(), n); };
        } else {
          // No cache: the request takes the K/V of all but its last token (computed at admission).
          keep = [&](size_t, std::vector<int32_t>& slots) {
            r->seq.slots.assign(slots.begin(), slots.begin() + (n - 1));
            slots.erase(slots.begin(), slots.begin() + (n - 1));
          };
        }
        r->prompt_lps = std::move(score_now({r->seq.tokens}, 0, {}, r->params.prompt_logprobs, keep)[0].tokens);
      }
      admit(r);
    }
    scoring_.erase(scoring_.begin(), scoring_.begin() + std::ptrdiff_t(done));
  }

  // Hands the requests whose grammar's warm-up is over to the scheduler, in arrival order.
  void admit_warmed() {
    std::erase_if(warming_, [&](Request* r) {
      if (is_warming(*r)) return false;
      sched_->add(&r->seq);
      return true;
    });
  }

  // Why a row's matcher refused its sampled token: the mask allows only tokens some stack takes,
  // so a refusal is the matcher giving up on a step (Matcher::overflowed), not the model's pick.
  static std::string grammar_refusal(const Request& r, int32_t token) {
    if (r.matcher && r.matcher->overflowed())
      return "grammar: too ambiguous for the matcher (one step went past its bound on stacks, as nested "
             "repetitions make them): simplify the grammar";
    return fmt::format("grammar: the sampled token {} is outside the grammar", token);
  }

  RequestOutput fail_request(Request& r, std::string why) {
    RequestOutput o = base_output(r);
    o.text = r.text.flush();
    o.finished = true;
    o.finish_reason = FinishReason::Error;
    o.error = std::move(why);
    return o;
  }

  // Advances every constrained row's grammar over its sampled token (a stop token or one with no
  // bytes leaves it as it is); grammar_ok_[row] is false where the token is outside the grammar.
  // A JSON-schema matcher takes a few microseconds a token: the rows run on the mask threads
  // rather than one after another on the engine thread (64 rows: ~190 -> ~50 us a step).
  void accept_grammars(const StepResult& res) {
    grammar_ok_.assign(rows_req_.size(), 1);
    if (constraints_.words == 0 || !mask_pool_) return;
    auto advance = [&](size_t i) {
      Request& r = *rows_req_[i];
      if (!r.matcher || (!dead_rows_.empty() && dead_rows_[i])) return;
      const int32_t tok = res.rows[i].token;
      const bool is_stop = std::find(stop_ids_.begin(), stop_ids_.end(), tok) != stop_ids_.end() ||
                           std::find(r.params.stop_token_ids.begin(), r.params.stop_token_ids.end(), tok) !=
                               r.params.stop_token_ids.end();
      const std::string_view bytes = r.grammar->vocab().bytes(tok);
      if (is_stop || bytes.empty()) return;
      if (!r.matcher->accept_bytes(bytes)) {
        grammar_ok_[i] = 0;
        return;
      }
      r.matcher->commit();
    };
    std::atomic<size_t> next{0};
    mask_pool_->run([&](int, int) {
      for (size_t i; (i = next.fetch_add(1)) < rows_req_.size();) advance(i);
    });
  }

  // Appends the chosen token (its grammar already advanced: accept_grammars) and decides whether
  // the request is finished.
  RequestOutput accept_token(Request& r, int32_t tok, std::vector<TokenLogprobs> lps) {
    r.sampler.accept(tok);
    r.seq.tokens.push_back(tok);
    RequestOutput o = base_output(r);
    o.tokens.push_back(tok);
    o.logprobs = std::move(lps);
    const auto& sp = r.params;
    const bool eos = !sp.ignore_eos && std::find(stop_ids_.begin(), stop_ids_.end(), tok) != stop_ids_.end();
    const bool stop_id = std::find(sp.stop_token_ids.begin(), sp.stop_token_ids.end(), tok) != sp.stop_token_ids.end();
    if (eos || stop_id) {
      if (sp.include_stop_str_in_output) {  // vLLM: the stop token's text too (none for a skipped control token)
        bool unused = false;
        o.text = r.text.push(tok, &unused, false);
      }
      o.text += r.text.flush();
      o.finished = true;
      o.finish_reason = FinishReason::Stop;
      return o;
    }
    bool stopped = false;
    o.text = r.text.push(tok, &stopped, r.seq.num_generated() > sp.min_tokens);
    if (stopped) {
      o.finished = true;
      o.finish_reason = FinishReason::Stop;
    } else if (r.seq.num_generated() >= sp.max_tokens || r.seq.num_tokens() >= model().ctx) {
      o.text += r.text.flush();
      o.finished = true;
      o.finish_reason = FinishReason::Length;
    }
    return o;
  }

  // Declared in construction order, so destroyed in reverse: weights may point into the files
  // (mmap) and every device buffer belongs to the backend.
  ModelFiles files_;
  std::unique_ptr<RankModels> ranks_;  // backends and models of every tensor-parallel rank
  ops::Backend& backend() const { return ranks_->backend(0); }
  const LoadedModel& model() const { return ranks_->model(0); }
  std::unique_ptr<kv::KvPool> pool_;
  std::unique_ptr<kv::ReqRows> rows_;
  std::unique_ptr<kv::RadixCache> cache_;  // automatic prefix caching (nullptr: off)
  std::unique_ptr<Scheduler> sched_;
  std::unique_ptr<Runner> runner_;
  std::unique_ptr<ChatTemplates> templates_;  // the model's or --chat-template, and per-call ones
  std::unordered_map<int64_t, std::unique_ptr<Request>> requests_;
  std::vector<int64_t> cancelled_;
  std::vector<int32_t> stop_ids_;
  std::vector<sampling::SequenceSampler*> samplers_;  // of this step's sampled rows
  std::vector<Request*> rows_req_;                      // the same rows' requests
  std::unique_ptr<GrammarCache> grammars_;
  std::vector<Request*> warming_;  // requests whose grammar is being warmed, not yet scheduled
  std::vector<Request*> scoring_;  // requests whose prompt_logprobs are not scored yet
  double fill_us_ = 0;             // this step's mask fill (the -v step log)
  StepConstraints constraints_;
  std::vector<uint8_t> dead_rows_;  // rows whose grammar allowed no token this step
  std::vector<uint8_t> grammar_ok_;  // rows whose sampled token their grammar accepted
  std::unique_ptr<ThreadPool> mask_pool_;  // fills the rows' grammar masks in parallel
  ModelInfo info_;
  int64_t next_id_ = 1;
};

}  // namespace

std::unique_ptr<Engine> Engine::create(const EngineOptions& opts) {
  return std::make_unique<EngineImpl>(opts);
}

}  // namespace lite_llama

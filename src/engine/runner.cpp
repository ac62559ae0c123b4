#include "engine/runner.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <utility>

#include "core/error.h"
#include "core/log.h"
#include "sampling/sampler.h"

namespace lite_llama {

using sampling::SequenceSampler;

namespace {

// Rows whose token is the argmax, picked on the device (inside the graph where there is one).
bool is_greedy(const SamplingParams& p) {
  return p.temperature == 0.0f && p.top_logprobs < 0 && p.repetition_penalty == 1.0f &&
         p.presence_penalty == 0.0f && p.frequency_penalty == 0.0f;
}

SampledToken sample_on_host(SequenceSampler& s, float* logits, int64_t vocab, const float* raw = nullptr) {
  float lp = 0;
  int32_t rank = 0;
  std::vector<sampling::TokenLogprob> top;
  const bool want_lp = s.params().top_logprobs >= 0;
  const int32_t tok = s.sample(logits, vocab, want_lp ? &lp : nullptr, want_lp ? &top : nullptr,
                               want_lp ? &rank : nullptr, raw);
  if (!want_lp) return {tok, {}};
  TokenLogprobs tl;
  tl.token = tok;
  tl.logprob = lp;
  tl.rank = rank;
  for (const auto& t : top) tl.top.emplace_back(t.token, t.logprob);
  return {tok, {std::move(tl)}};
}

// Host-side masking and biases of one row (the device does it in Backend::constrain_logits).
// raw: where given, the row after the grammar's mask and before the biases, which the logprobs
// come from (vLLM: grammar-masked logits, logit_bias and min_tokens applied after its logprobs).
void constrain_on_host(float* l, int64_t limit, int row, const StepConstraints& c, std::vector<float>* raw) {
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  if (c.words > 0) {
    const uint32_t* m = c.masks.data() + size_t(row) * size_t(c.words);
    for (int64_t t = 0; t < limit; ++t)
      if (!((m[t / 32] >> (t % 32)) & 1u)) l[t] = kNegInf;
  }
  if (raw) raw->assign(l, l + limit);
  for (const ops::LogitBias& b : c.bias)
    if (b.row == row && b.token < limit) l[b.token] += b.bias;
}

}  // namespace

Runner::Runner(std::vector<Decoder*> decoders, RankGroup& ranks, int ctx, int sample_limit)
    : decoders_(std::move(decoders)),
      ranks_(ranks),
      decoder_(*decoders_.at(0)),
      backend_(decoder_.backend()),
      ctx_(ctx),
      max_seqs_(decoder_.max_seqs()),
      sample_limit_(sample_limit),
      vocab_(decoder_.logit_cols()) {
  LL_CHECK(int(decoders_.size()) == ranks.size(), "{} decoders for {} ranks", decoders_.size(), ranks.size());
  host_logits_.resize(size_t(max_seqs_) * size_t(vocab_));
  host_tokens_.resize(size_t(max_seqs_));
  device_tokens_ = backend_.alloc(size_t(max_seqs_) * sizeof(int32_t));
  backend_.reserve_constraints(max_seqs_, (sample_limit_ + 31) / 32, 4096);
  // Penalty entries of one step: distinct tokens per sequence, bounded by its length.
  backend_.reserve_sampling(max_seqs_, int(std::min<int64_t>(int64_t(max_seqs_) * ctx_, 1 << 22)));
  backend_.reserve_kept_rows(std::min(max_seqs_, kMaxKeptRows), vocab_);
}

// One graph per batch-size bucket; lengths live in device memory, so each graph serves every
// context length.
void Runner::capture_graphs() {
  if (!backend_.supports_graphs()) return;
  for (int b : {1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 160, 192, 224, 256, 320, 384, 448, 512})
    if (b <= max_seqs_) graph_sizes_.push_back(b);
  if (graph_sizes_.empty() || graph_sizes_.back() != max_seqs_) graph_sizes_.push_back(max_seqs_);
  // The backends' timed choices for the projections at these batch sizes, before graphs fix them.
  std::vector<std::pair<int, int>> tuned(decoders_.size());
  const auto t0 = std::chrono::steady_clock::now();
  ranks_.run([&](int r) { tuned[size_t(r)] = decoders_[size_t(r)]->tune_linears(graph_sizes_); });
  if (tuned[0].first > 0)
    LL_INFO("projections: {} products tuned ({} took another algorithm than the heuristic's first) in {:.0f} ms",
            tuned[0].first, tuned[0].second,
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  for (int b : graph_sizes_) {
    StepShape shape;
    shape.num_tokens = shape.num_seqs = shape.num_logits = shape.num_decode_seqs = b;
    shape.max_q_len = 1;
    shape.max_seq_len = ctx_;  // fixes the flash-decoding split count for this bucket
    // Every rank captures its part of the step at once (NCCL calls are captured in the graphs).
    std::vector<int> ids(decoders_.size(), -1);
    ranks_.run([&](int r) {
      Decoder& d = *decoders_[size_t(r)];
      ids[size_t(r)] = d.backend().capture_graph([&] {
        Tensor logits = d.run(shape);
        if (r == 0) backend_.argmax(logits, b, sample_limit_, device_tokens_.as<int32_t>());
      });
    });
    graphs_.push_back(std::move(ids));
  }
}

int Runner::graph_bucket(int num_seqs) const {
  for (size_t i = 0; i < graph_sizes_.size(); ++i)
    if (graph_sizes_[i] >= num_seqs) return int(i);
  return -1;
}

StepResult Runner::run(const StepPlan& plan, const std::vector<SequenceSampler*>& samplers,
                       const StepConstraints* constraints, const std::function<void()>& before_select) {
  const bool decode_only = build_batch(plan);
  LL_CHECK(samplers.size() == batch_.logit_rows.size(), "{} samplers for {} sampled rows",
           samplers.size(), batch_.logit_rows.size());
  // A constrained step picks its tokens after the masks (the graph's argmax goes unused).
  bool greedy = std::all_of(samplers.begin(), samplers.end(), [](const SequenceSampler* s) {
    return is_greedy(s->params()) && s->params().grammar.empty() && s->params().logit_bias.empty();
  });
  // Masks (allowed_token_ids) and biases (logit_bias, bad_words, min_tokens' stop tokens) are
  // applied before a token is picked.
  if (constraints && constraints->any()) greedy = false;
  const Tensor logits = forward(decode_only, greedy);
  if (before_select) before_select();
  if (constraints && !constraints->any()) constraints = nullptr;
  return select(plan, samplers, logits, greedy, constraints);
}

bool Runner::build_batch(const StepPlan& plan) {
  batch_.clear();
  table_writes_.clear();
  bool decode_only = true;
  for (const ScheduledSeq& it : plan.items) {
    const Sequence* s = it.seq;
    if (it.table_start < s->num_computed)  // a prefix taken from the prefix cache
      table_writes_.push_back({s->req_row, it.table_start, s->slots.data() + it.table_start,
                               s->num_computed - it.table_start});
    const int kv_len = s->num_computed + it.num_tokens;
    batch_.add_sequence(s->req_row, s->tokens.data() + s->num_computed, it.num_tokens, s->num_computed,
                        s->slots.data() + s->num_computed, it.sample, s->slots[0], s->leading_run(kv_len));
    decode_only = decode_only && it.num_tokens == 1 && it.sample;
  }
  return decode_only;
}

Tensor Runner::forward(bool decode_only, bool greedy) {
  const int n = int(batch_.logit_rows.size());
  const int bucket = decode_only && !profiling_ ? graph_bucket(batch_.num_seqs()) : -1;
  if (bucket < 0) {
    // Rank 0 runs on this thread, so the argmax follows its forward on its stream.
    Tensor logits = forward_eager(batch_, true);
    if (greedy) backend_.argmax(logits, n, sample_limit_, device_tokens_.as<int32_t>());
    return logits;
  }
  // Pad to the captured batch size by repeating the last sequence: the copies write the same
  // K/V to the same slot and their logits are ignored.
  while (batch_.num_seqs() < graph_sizes_[size_t(bucket)]) {
    const int last = batch_.num_seqs() - 1;
    const int32_t tok = batch_.t_token_ids.back(), slot = batch_.t_slots.back();
    batch_.add_sequence(batch_.b_req_idx[size_t(last)], &tok, 1, batch_.t_positions.back(), &slot, true,
                        batch_.b_kv_runs[2 * size_t(last)], batch_.b_kv_runs[2 * size_t(last) + 1]);
  }
  ranks_.run([&](int r) {
    Decoder& d = *decoders_[size_t(r)];
    write_tables(d);
    d.stage(batch_);
    d.backend().replay_graph(graphs_[size_t(bucket)][size_t(r)]);  // forward (+ argmax on rank 0)
  });
  return decoder_.logits_buffer();
}

void Runner::write_tables(Decoder& d) const {
  for (const TableWrite& w : table_writes_) d.write_table(w.row, w.start, w.slots, w.n);
}

Tensor Runner::forward_eager(const ForwardBatch& batch, bool with_tables) {
  Tensor logits;
  ranks_.run([&](int r) {
    Decoder& d = *decoders_[size_t(r)];
    if (with_tables) write_tables(d);
    Tensor l = d.forward(batch);
    if (r == 0) logits = l;
  });
  return logits;
}

Tensor Runner::token_logits_all(int first, int n) {
  Tensor logits;
  ranks_.run([&](int r) {
    Tensor l = decoders_[size_t(r)]->token_logits(first, n);
    if (r == 0) logits = l;
  });
  return logits;
}

StepResult Runner::select(const StepPlan& plan, const std::vector<SequenceSampler*>& samplers,
                          const Tensor& logits, bool greedy, const StepConstraints* constraints) {
  const int n = int(samplers.size());  // the padding rows of a graph step are not read
  StepResult res;
  res.rows.resize(size_t(n));
  // Argmax on the device (in the graph); otherwise the device sampler, the logprobs of the rows
  // that want them scored on the device too; the host where the backend cannot.
  constrained_on_device_ = false;
  Tensor kept;  // the rows that want logprobs, as sampling found them
  std::vector<int32_t> lp_rows;
  if (greedy || sample_on_device(plan, samplers, logits, n, constraints, lp_rows, kept)) {
    backend_.copy_to_host(host_tokens_.data(), device_tokens_.data(), size_t(n) * sizeof(int32_t));
    for (size_t r = 0; r < size_t(n); ++r) res.rows[r].token = host_tokens_[r];
    if (!lp_rows.empty()) logprobs_on_device(samplers, kept, lp_rows, res);
    return res;
  }
  float* lg = logits.ptr<float>();
  if (logits.device != Device::CPU) {
    const size_t bytes = size_t(n) * size_t(vocab_) * sizeof(float);
    backend_.copy_to_host(host_logits_.data(), logits.data, bytes);
    lg = host_logits_.data();
  }
  for (size_t r = 0; r < size_t(n); ++r) {
    float* l = lg + int64_t(r) * vocab_;
    // Embedding rows past the tokenizer's vocabulary are padding: never sample them.
    std::fill(l + sample_limit_, l + vocab_, -std::numeric_limits<float>::infinity());
    const bool raw = constraints && !constrained_on_device_ && !constraints->bias.empty() &&
                     samplers[r]->params().top_logprobs >= 0;
    if (constraints && !constrained_on_device_)
      constrain_on_host(l, sample_limit_, int(r), *constraints, raw ? &raw_row_ : nullptr);
    res.rows[r] = sample_on_host(*samplers[r], l, sample_limit_, raw ? raw_row_.data() : nullptr);
  }
  return res;
}

bool Runner::sample_on_device(const StepPlan& plan,
                              const std::vector<SequenceSampler*>& samplers,
                              const Tensor& logits, int n, const StepConstraints* constraints,
                              std::vector<int32_t>& lp_rows, Tensor& kept) {
  if (!backend_.supports_device_sampling()) return false;
  // Rows that want logprobs keep a copy of their logits before the biases and penalties (the
  // distribution vLLM reports), masked by their grammar as the host path's.
  for (int r = 0; r < n; ++r) {
    const int k = samplers[size_t(r)]->params().top_logprobs;
    if (k > ops::Backend::kMaxTopLogprobs) return false;
    if (k >= 0) lp_rows.push_back(r);
  }
  if (!lp_rows.empty() && !backend_.keep_rows(logits, lp_rows.data(), int(lp_rows.size()), &kept)) {
    lp_rows.clear();
    return false;
  }
  if (constraints) {
    if (!backend_.constrain_logits(logits, n, constraints->masks.data(), constraints->words,
                                   constraints->bias)) {
      lp_rows.clear();
      return false;
    }
    constrained_on_device_ = true;  // the logits hold the masks from here on, whatever samples
    if (!lp_rows.empty() && constraints->words > 0) {
      std::vector<uint32_t> masks;
      for (int32_t r : lp_rows)
        masks.insert(masks.end(), constraints->masks.begin() + ptrdiff_t(r) * constraints->words,
                     constraints->masks.begin() + ptrdiff_t(r + 1) * constraints->words);
      LL_CHECK(backend_.constrain_logits(kept, int(lp_rows.size()), masks.data(), constraints->words, {}),
               "masking the kept logprob rows failed");
    }
  }
  std::vector<ops::SampleRow> rows;
  std::vector<int32_t> pen_tokens, pen_counts;
  size_t i = 0;
  for (const ScheduledSeq& it : plan.items) {
    if (!it.sample) continue;
    const SequenceSampler& s = *samplers[i++];
    const SamplingParams& p = s.params();
    ops::SampleRow row;
    row.temperature = p.temperature;
    row.top_p = p.top_p;
    row.min_p = p.min_p;
    row.top_k = p.top_k;
    row.repetition_penalty = p.repetition_penalty;
    row.presence_penalty = p.presence_penalty;
    row.frequency_penalty = p.frequency_penalty;
    row.seed = s.seed();
    row.counter = uint64_t(it.seq->num_generated());
    row.pen_offset = int(pen_tokens.size());
    s.penalty_entries(pen_tokens, pen_counts);
    row.pen_count = int(pen_tokens.size()) - row.pen_offset;
    rows.push_back(row);
  }
  return backend_.sample(logits, n, sample_limit_, rows, pen_tokens, pen_counts,
                         device_tokens_.as<int32_t>());
}

// The logprobs of the rows that asked, from their kept logits and the tokens the device drew.
void Runner::logprobs_on_device(const std::vector<SequenceSampler*>& samplers, const Tensor& kept,
                                const std::vector<int32_t>& lp_rows, StepResult& res) {
  const int m = int(lp_rows.size());
  int k = 0;
  std::vector<int32_t> targets;
  for (int32_t r : lp_rows) {
    k = std::max(k, samplers[size_t(r)]->params().top_logprobs);
    targets.push_back(res.rows[size_t(r)].token);
  }
  k = std::min(k, sample_limit_);
  std::vector<ops::RowScore> rs(static_cast<size_t>(m));
  std::vector<ops::TopToken> top(static_cast<size_t>(m * k));
  LL_CHECK(backend_.score_rows(kept, m, sample_limit_, targets.data(), k, rs.data(), top.data()),
           "device logprobs failed");
  for (int i = 0; i < m; ++i) {
    SampledToken& t = res.rows[size_t(lp_rows[size_t(i)])];
    TokenLogprobs tl;
    tl.token = t.token;
    tl.logprob = rs[size_t(i)].logprob;
    tl.rank = rs[size_t(i)].rank;
    const int want = std::min(k, samplers[size_t(lp_rows[size_t(i)])]->params().top_logprobs);
    for (int j = 0; j < want; ++j) tl.top.emplace_back(top[size_t(i * k + j)].token, top[size_t(i * k + j)].logprob);
    t.logprobs = {std::move(tl)};
  }
}

}  // namespace lite_llama

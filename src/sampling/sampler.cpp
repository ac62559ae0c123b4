#include "sampling/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "ops/score_row.h"

namespace lite_llama::sampling {

int32_t argmax(const float* x, int64_t n) {
  int64_t best = 0;
  for (int64_t i = 1; i < n; ++i)
    if (x[i] > x[best]) best = i;
  return int32_t(best);
}

void log_softmax_top(const float* x, int64_t n, int k, int32_t chosen, float* chosen_lp,
                     std::vector<TokenLogprob>* top, int32_t* chosen_rank) {
  ops::RowScore rs;
  std::vector<ops::TopToken> best(top ? size_t(std::max(0, k)) : 0);
  ops::score_row(x, n, chosen, top ? k : 0, &rs, best.data());
  if (chosen_lp) *chosen_lp = rs.logprob;
  if (chosen_rank) *chosen_rank = rs.rank;
  if (!top || k <= 0) return;
  top->clear();
  for (size_t i = 0; i < std::min<size_t>(best.size(), size_t(n)); ++i) top->push_back({best[i].token, best[i].logprob});
}

SequenceSampler::SequenceSampler(const SamplingParams& p, const std::vector<int32_t>& prompt)
    : params_(p) {
  seed_ = p.seed ? *p.seed : (uint64_t(std::random_device{}()) << 32 | std::random_device{}());
  rng_.seed(seed_);
  if (p.repetition_penalty != 1.0f)
    for (int32_t t : prompt) mark_seen(t);
}

void SequenceSampler::mark_seen(int32_t t) {
  if (t < 0) return;
  if (t >= int32_t(seen_mask_.size())) seen_mask_.resize(size_t(t) + 1, 0);
  if (!seen_mask_[size_t(t)]) seen_mask_[size_t(t)] = 1, seen_.push_back(t);
}

void SequenceSampler::accept(int32_t t) {
  if (params_.presence_penalty != 0 || params_.frequency_penalty != 0) ++output_counts_[t];
  if (params_.repetition_penalty != 1.0f) mark_seen(t);
}

void SequenceSampler::penalty_entries(std::vector<int32_t>& tokens, std::vector<int32_t>& counts) const {
  for (const auto& [t, n] : output_counts_) tokens.push_back(t), counts.push_back(n);
  for (int32_t t : seen_)
    if (!output_counts_.count(t)) tokens.push_back(t), counts.push_back(-1);
}

void SequenceSampler::apply_penalties(float* logits, int64_t vocab) const {
  const float rp = params_.repetition_penalty;
  if (rp != 1.0f)
    for (int32_t t : seen_)
      if (t < vocab) logits[t] = logits[t] > 0 ? logits[t] / rp : logits[t] * rp;
  for (const auto& [t, n] : output_counts_)
    if (t < vocab) logits[t] -= params_.presence_penalty + params_.frequency_penalty * float(n);
}

int32_t SequenceSampler::sample(float* logits, int64_t vocab, float* chosen_logprob,
                                std::vector<TokenLogprob>* top, int32_t* chosen_rank,
                                const float* raw_logits) {
  // Logprobs are reported from the model's raw distribution (as vLLM does by default).
  std::vector<float> raw;
  if (params_.top_logprobs >= 0) raw.assign(raw_logits ? raw_logits : logits, (raw_logits ? raw_logits : logits) + vocab);
  apply_penalties(logits, vocab);

  int32_t chosen;
  if (params_.temperature < kGreedyTemperature) {
    chosen = argmax(logits, vocab);
  } else {
    const float inv_t = 1.0f / params_.temperature;
    float mx = -std::numeric_limits<float>::infinity();
    for (int64_t i = 0; i < vocab; ++i) mx = std::max(mx, logits[i]);
    // Candidates sorted by probability; only as many as top-k / top-p need are ordered.
    cand_.clear();
    cand_.reserve(size_t(vocab));
    for (int64_t i = 0; i < vocab; ++i)
      cand_.emplace_back(std::exp((logits[i] - mx) * inv_t), int32_t(i));
    auto by_prob = [](const auto& a, const auto& b) {
      return a.first > b.first || (a.first == b.first && a.second < b.second);
    };
    size_t keep = cand_.size(), sorted = 0;
    if (params_.top_k > 0 && size_t(params_.top_k) < keep) {
      keep = size_t(params_.top_k);
      std::partial_sort(cand_.begin(), cand_.begin() + long(keep), cand_.end(), by_prob);
      sorted = keep;
    }
    if (params_.top_p < 1.0f) {
      double denom = 0;
      for (size_t j = 0; j < keep; ++j) denom += cand_[j].first;
      // Order only as many candidates as the nucleus needs, growing the sorted prefix.
      size_t want = sorted ? sorted : std::min(keep, size_t(256));
      double mass = 0;
      size_t i = 0;
      for (;;) {
        if (want > sorted) {
          std::partial_sort(cand_.begin() + long(sorted), cand_.begin() + long(want),
                            cand_.begin() + long(keep), by_prob);
          sorted = want;
        }
        for (; i < sorted; ++i) {
          mass += cand_[i].first;
          if (mass >= params_.top_p * denom) break;
        }
        if (i < sorted) {
          keep = i + 1;
          break;
        }
        if (sorted == keep) break;
        want = std::min(keep, sorted * 8);
      }
    }
    cand_.resize(keep);
    if (params_.min_p > 0.0f) {
      float pmax = 0;
      for (auto& c : cand_) pmax = std::max(pmax, c.first);
      const float cut = params_.min_p * pmax;
      cand_.erase(std::remove_if(cand_.begin(), cand_.end(), [&](auto& c) { return c.first < cut; }),
                  cand_.end());
    }
    double sum = 0;
    for (auto& c : cand_) sum += c.first;
    double r = std::uniform_real_distribution<double>(0.0, sum)(rng_);
    // Rounding can leave r >= 0 after the loop: fall back to the last candidate with weight.
    chosen = cand_.back().second;
    for (auto it = cand_.rbegin(); it != cand_.rend(); ++it)
      if (it->first > 0) {
        chosen = it->second;
        break;
      }
    for (auto& c : cand_) {
      r -= c.first;
      if (r < 0) {
        chosen = c.second;
        break;
      }
    }
  }
  if (params_.top_logprobs >= 0)
    log_softmax_top(raw.data(), vocab, params_.top_logprobs, chosen, chosen_logprob, top, chosen_rank);
  return chosen;
}

}  // namespace lite_llama::sampling

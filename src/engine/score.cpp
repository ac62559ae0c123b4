#include "engine/score.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "ops/score_row.h"

namespace lite_llama {
namespace {

// Position `pos` of sequence `s` from its row score (and top tokens where top_k >= 0).
void record(int s, int pos, int32_t next, const ops::RowScore& rs, const ops::TopToken* top, int top_k,
            std::vector<ScoreResult>& out) {
  ScoreResult& o = out[size_t(s)];
  o.logprobs[size_t(pos)] = rs.logprob;
  o.argmax[size_t(pos)] = rs.argmax;
  if (top_k < 0) return;
  // As generation reports them (prompt logprobs): the sampler's log-softmax, rank and top-k.
  TokenLogprobs& t = o.tokens[size_t(pos)];
  t.token = next;
  t.logprob = rs.logprob;
  t.rank = rs.rank;
  for (int j = 0; j < top_k; ++j) t.top.emplace_back(top[j].token, top[j].logprob);
}

// Records position `pos` of sequence `s` from one logits row on the host.
void take_row(const float* l, int64_t V, int limit, int top_k, int s, int pos,
              const std::vector<std::vector<int32_t>>& seqs, std::vector<ScoreResult>& out,
              const LogitsSink& sink) {
  const auto& toks = seqs[size_t(s)];
  if (pos + 1 >= int(toks.size())) return;
  if (sink) sink(s, pos, l, V);
  const int k = std::min(std::max(0, top_k), limit);
  ops::RowScore rs;
  std::vector<ops::TopToken> top(static_cast<size_t>(k));
  ops::score_row(l, limit, toks[size_t(pos) + 1], k, &rs, top.data());
  record(s, pos, toks[size_t(pos) + 1], rs, top.data(), top_k < 0 ? -1 : k, out);
}

// The rows' logprobs, ranks, argmaxes and top tokens computed where the logits are (the GPU sends
// a few words a row instead of the row); false where the backend cannot.
bool score_on_backend(ScoreContext& c, const Tensor& logits, const std::vector<std::pair<int, int>>& where,
                      const std::vector<std::vector<int32_t>>& seqs, int top_k, std::vector<ScoreResult>& out) {
  const int k = std::min(std::max(0, top_k), c.vocab_limit), n = int(where.size());
  std::vector<int32_t> targets(size_t(n), -1);
  for (int r = 0; r < n; ++r) {
    const auto& toks = seqs[size_t(where[size_t(r)].first)];
    const size_t next = size_t(where[size_t(r)].second) + 1;
    if (next < toks.size()) targets[size_t(r)] = toks[next];
  }
  std::vector<ops::RowScore> rs(static_cast<size_t>(n));
  std::vector<ops::TopToken> top(static_cast<size_t>(n * k));
  if (!c.decoder.backend().score_rows(logits, n, c.vocab_limit, targets.data(), k, rs.data(), top.data()))
    return false;
  for (int r = 0; r < n; ++r)
    if (targets[size_t(r)] >= 0)
      record(where[size_t(r)].first, where[size_t(r)].second, targets[size_t(r)], rs[size_t(r)],
             top.data() + size_t(r) * size_t(k), top_k < 0 ? -1 : k, out);
  return true;
}

}  // namespace

std::vector<ScoreResult> score_sequences(ScoreContext& c, const std::vector<std::vector<int32_t>>& seqs,
                                         int decode_tail, const LogitsSink& sink, int top_k) {
  LL_CHECK(decode_tail >= 0, "decode_tail must be >= 0");
  std::vector<ScoreResult> out(seqs.size());
  for (size_t i = 0; i < seqs.size(); ++i) {
    LL_CHECK(seqs[i].size() >= 2, "sequence {} needs at least 2 tokens to score", i);
    out[i].logprobs.assign(seqs[i].size() - 1, 0.f);
    out[i].argmax.assign(seqs[i].size() - 1, 0);
    if (top_k >= 0) out[i].tokens.resize(seqs[i].size() - 1);
  }
  const ModelConfig& cfg = c.decoder.config();
  const int64_t V = c.decoder.logit_cols();  // a row's stride; the sink sees the vocabulary's columns
  std::vector<float> host;  // the logits rows, where the backend does not score them itself
  ForwardBatch b;
  // Groups of sequences that fit the request rows at once.
  for (size_t g0 = 0; g0 < seqs.size(); g0 += size_t(c.max_seqs)) {
    const size_t g1 = std::min(seqs.size(), g0 + size_t(c.max_seqs));
    std::vector<int32_t> rows;
    std::vector<std::vector<int32_t>> slots(g1 - g0);
    struct Release {
      ScoreContext& c;
      std::vector<int32_t>& rows;
      std::vector<std::vector<int32_t>>& slots;
      ~Release() {
        for (auto& s : slots) c.pool.release(s.data(), int32_t(s.size()));
        for (int32_t r : rows) c.rows.release(r);
      }
    } release{c, rows, slots};
    for (size_t i = g0; i < g1; ++i) {
      const int32_t r = c.rows.alloc();
      LL_CHECK(r >= 0, "no free request row to score with");
      rows.push_back(r);
      LL_CHECK(c.pool.alloc(int32_t(seqs[i].size()), slots[i - g0]),
               "sequence {} of {} tokens does not fit the KV pool ({} free slots)", i,
               seqs[i].size(), c.pool.num_free());
    }
    auto take = [&](const Tensor& logits, const std::vector<std::pair<int, int>>& where) {  // (seq, pos) a row
      if (!sink && score_on_backend(c, logits, where, seqs, top_k, out)) return;
      host.resize(size_t(c.max_seqs) * size_t(V));
      c.decoder.backend().copy_to_host(host.data(), logits.data, size_t(where.size()) * size_t(V) * 4);
      for (size_t r = 0; r < where.size(); ++r)
        take_row(host.data() + r * size_t(V), cfg.vocab_size, c.vocab_limit, top_k, where[r].first, where[r].second, seqs,
                 out, sink);
    };
    // Phase 1: chunked prefill, one sequence at a time, every position's logits: chunks of
    // max_tokens whose rows' logits come max_seqs at a time.
    for (size_t i = g0; i < g1; ++i) {
      const auto& t = seqs[i];
      const int prefill = std::max(1, int(t.size()) - decode_tail);
      for (int p0 = 0; p0 < prefill; p0 += c.max_tokens) {
        const int n = std::min(c.max_tokens, prefill - p0);
        b.clear();
        b.add_sequence(rows[i - g0], t.data() + p0, n, p0, slots[i - g0].data() + p0, false);
        std::vector<std::pair<int, int>> where;
        c.forward(b);
        // The last position has no next token to score unless a decode tail follows.
        const int scored = p0 + n < int(t.size()) - 1 ? n : int(t.size()) - 1 - p0;
        for (int j0 = 0; j0 < scored; j0 += c.max_seqs) {
          const int m = std::min(c.max_seqs, scored - j0);
          where.clear();
          for (int j = 0; j < m; ++j) where.emplace_back(int(i), p0 + j0 + j);
          take(c.token_logits(j0, m), where);
        }
      }
    }
    // Phase 2: the tails as batched single-token decode steps.
    for (int k = 0;; ++k) {
      b.clear();
      std::vector<std::pair<int, int>> where;
      for (size_t i = g0; i < g1; ++i) {
        const auto& t = seqs[i];
        const int pos = std::max(1, int(t.size()) - decode_tail) + k;
        if (pos >= int(t.size())) continue;
        b.add_sequence(rows[i - g0], t.data() + pos, 1, pos, slots[i - g0].data() + pos, true);
        where.emplace_back(int(i), pos);
      }
      if (where.empty()) break;
      take(c.forward(b), where);
    }
    if (c.on_scored)
      for (size_t i = g0; i < g1; ++i) c.on_scored(i, slots[i - g0]);
  }
  return out;
}

}  // namespace lite_llama

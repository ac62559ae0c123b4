#include "model/decoder.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <tuple>

#include "core/error.h"
#include "core/gq.h"

namespace lite_llama {

Decoder::Decoder(const ModelConfig& cfg, Weights weights, ops::Backend& backend, int max_tokens,
                 int max_seqs, int max_ctx, TpShard shard)
    : cfg_(cfg), shard_(shard), w_(std::move(weights)), be_(backend), max_ctx_(max_ctx), max_tokens_(max_tokens),
      max_seqs_(max_seqs) {
  LL_CHECK(shard.size == backend.tp_size() && shard.rank == backend.tp_rank(),
           "decoder: rank {} of {} on a backend of rank {} of {}", shard.rank, shard.size, backend.tp_rank(),
           backend.tp_size());
  vocab_rows_ = shard.active() ? vocab_shard_rows(cfg.vocab_size, shard.size) : cfg.vocab_size;
  table_rows_ = shard.active() ? vocab_table_rows(cfg.vocab_size, shard.size) : cfg.vocab_size;
  // A logits row of a vocabulary not a multiple of 4 (32001, 128257) is not 16-byte aligned, and
  // cuBLASLt then runs the LM head with an sm75 align1 kernel (H200: a 256-row head 1.5 ms, not
  // 0.2): on the GPU the rows are padded to 4 columns, which the LM head's GEMM leaves alone (it
  // also splits its outputs at a multiple of 8: CudaLinear::run).
  const bool pad = !shard.active() && backend.device() != Device::CPU && w_.lm_head.parts.size() == 1 &&
                   !is_gq(w_.lm_head.parts[0].dtype) && !w_.lm_head.bias.data;
  logit_cols_ = pad ? (cfg.vocab_size + 3) / 4 * 4 : cfg.vocab_size;
  LL_CHECK(max_tokens >= 1 && max_seqs >= 1 && max_seqs <= max_tokens,
           "decoder needs 1 <= max_seqs ({}) <= max_tokens ({})", max_seqs, max_tokens);
  const int64_t H = cfg.hidden_size, F = dense_ffn(cfg), D = cfg.head_dim;
  const int64_t qd = cfg.num_heads * D, kvd = cfg.num_kv_heads * D;
  const size_t T = size_t(max_tokens), B = size_t(max_seqs);
  // One arena for all activations; each buffer 64-element aligned.
  size_t off = 0;
  auto take = [&](size_t n) {
    size_t o = off;
    off += (n + 63) / 64 * 64;
    return o;
  };
  off_h_ = take(T * H);
  off_qkv_ = take(T * size_t(qd + 2 * kvd));
  off_q_ = take(T * size_t(qd));
  off_attn_ = take(T * size_t(qd));
  off_gu_ = take(T * size_t(2 * F));
  off_mlp_ = take(T * size_t(F));
  off_hl_ = take(B * H);
  off_router_ = take(T * size_t(cfg.num_experts));
  act_ = be_.alloc(off * dtype_info(be_.act_dtype()).block_bytes);
  // The residual stream and what is added to it (the O and down projections' outputs), in the
  // backend's residual dtype: fp32 on the GPU keeps the model's large activations out of 16 bits.
  off = 0;
  off_x_ = take(T * H);
  off_o_ = take(T * H);
  off_down_ = take(T * H);
  off_xl_ = take(B * H);
  off_dl_ = take(B * H);
  resid_ = be_.alloc(off * dtype_info(be_.residual_dtype()).block_bytes);
  if (cfg.is_moe()) {
    // Routing results (int32 experts, f32 weights) then the experts' workspace.
    const ops::MoeExperts* ex = nullptr;
    for (const LayerWeights& lw : w_.layers)
      if (lw.moe) ex = &lw.experts;
    LL_CHECK(ex != nullptr, "decoder: a mixture-of-experts config without sparse layers");
    const size_t routes = T * size_t(cfg.num_experts_per_tok);
    moe_ws_offset_ = (routes * 8 + 255) / 256 * 256;
    moe_ = be_.alloc(moe_ws_offset_ + be_.moe_workspace_bytes(max_tokens, int(cfg.num_experts_per_tok), *ex));
  }
  logits_ = be_.alloc(B * size_t(logit_cols_) * sizeof(float));
  if (logit_cols_ != cfg.vocab_size) be_.zero(logits_buffer());  // the padding columns stay 0
  if (shard.active()) {
    lm_local_ = be_.alloc(B * size_t(table_rows_) * sizeof(float));
    gather_ws_ = be_.alloc(be_.all_gather_workspace_bytes(lm_local(int(B))));
  }

  size_t m = 0;
  auto take_i = [&](size_t n) {
    size_t o = m;
    m += n;
    return o;
  };
  m_ids_ = take_i(T), m_pos_ = take_i(T), m_slots_ = take_i(T), m_treq_ = take_i(T);
  m_qstart_ = take_i(B), m_qlen_ = take_i(B), m_seqlen_ = take_i(B), m_breq_ = take_i(B);
  m_rows_ = take_i(B);
  m += m & 1;  // 8-byte aligned: the decode kernel loads a run as one int2
  m_kvrun_ = take_i(2 * B);
  meta_ = be_.alloc(m * sizeof(int32_t));
  meta_host_.assign(m, 0);
  table_meta_ = be_.alloc(3 * T * sizeof(int32_t));
  table_host_.assign(3 * T, 0);
  attn_ws_ = be_.alloc(be_.attention_workspace_bytes(max_seqs, int(cfg.num_heads), int(D)));

  // Rotary table for every position the cache can hold.
  const std::vector<float> inv = cfg.inv_freq();
  const int rot = int(cfg.rope_dim);
  const int64_t npos = max_ctx;
  Buffer tab = host_buffer(size_t(npos) * size_t(rot) * sizeof(float));
  float* t = tab.as<float>();
  for (int64_t p = 0; p < npos; ++p)
    for (int i = 0; i < rot / 2; ++i) {
      // fp32 angle as HF computes it, then cos/sin rounded once.
      double a = double(float(p) * inv[size_t(i)]);
      t[p * rot + i] = float(std::cos(a));
      t[p * rot + rot / 2 + i] = float(std::sin(a));
    }
  rope_.cos_sin = be_.upload(Tensor(tab.data(), DType::F32, {npos, rot}), w_.keep);
  w_.keep.push_back(std::move(tab));
  rope_.rot_dim = rot;
  rope_.layout = cfg.rope_layout;
}

int64_t Decoder::dense_ffn(const ModelConfig& cfg) {
  return cfg.has_dense_layers() ? cfg.intermediate_size : 0;
}

int64_t Decoder::step_bytes_per_token(const ModelConfig& cfg, int64_t act_bytes, int64_t resid_bytes) {
  const int64_t H = cfg.hidden_size, F = dense_ffn(cfg), D = cfg.head_dim;
  const int64_t qd = cfg.num_heads * D, kvd = cfg.num_kv_heads * D;
  // The [T, *] buffers of the arena: h; qkv; q, attn; gate_up, mlp; router logits. Of the
  // residual dtype: x, o, down. Then 4 int32 metadata arrays and write_table's 3.
  const int64_t elems = H + (qd + 2 * kvd) + 2 * qd + 3 * F + cfg.num_experts;
  // MoE: each token's routes (expert, weight) and an estimate of the experts' workspace (its
  // rows, gate|up, SwiGLU and outputs, as the CPU backend lays it out).
  const int64_t k = cfg.num_experts_per_tok;
  const int64_t moe = k * 8 + k * (2 * H + 3 * cfg.moe_intermediate_size) * 4;
  return elems * act_bytes + 3 * H * resid_bytes + 7 * int64_t(sizeof(int32_t)) + (cfg.is_moe() ? moe : 0);
}

Tensor Decoder::act(size_t offset, int64_t rows, int64_t cols) const {
  const size_t es = dtype_info(be_.act_dtype()).block_bytes;
  return Tensor(act_.as<uint8_t>() + offset * es, be_.act_dtype(), {rows, cols}, be_.device());
}

Tensor Decoder::resid(size_t offset, int64_t rows, int64_t cols) const {
  const size_t es = dtype_info(be_.residual_dtype()).block_bytes;
  return Tensor(resid_.as<uint8_t>() + offset * es, be_.residual_dtype(), {rows, cols}, be_.device());
}

Tensor Decoder::lm_local(int rows) const {
  return Tensor(lm_local_.data(), DType::F32, {int64_t(rows), table_rows_}, be_.device());
}

Tensor Decoder::logits_buffer() const {
  return Tensor(logits_.data(), DType::F32, {int64_t(max_seqs_), logit_cols_}, be_.device());
}

StepShape Decoder::stage(const ForwardBatch& b) {
  LL_CHECK(kv_ != nullptr, "decoder has no KV cache");
  StepShape s;
  s.num_tokens = b.num_tokens();
  s.num_seqs = b.num_seqs();
  s.num_logits = int(b.logit_rows.size());
  s.num_decode_seqs = b.num_decode_seqs;
  LL_CHECK(s.num_tokens >= 1 && s.num_tokens <= max_tokens_,
           "step of {} tokens outside 1..{}", s.num_tokens, max_tokens_);
  LL_CHECK(s.num_seqs >= 1 && s.num_seqs <= max_seqs_ && s.num_logits <= max_seqs_,
           "step of {} sequences outside 1..{}", s.num_seqs, max_seqs_);
  // Validated on the host: device kernels trust these indices.
  const int64_t V = cfg_.vocab_size, slots = kv_->num_slots();
  for (int t = 0; t < s.num_tokens; ++t) {
    LL_CHECK(b.t_token_ids[size_t(t)] >= 0 && b.t_token_ids[size_t(t)] < V,
             "token id {} outside the vocabulary of {}", b.t_token_ids[size_t(t)], V);
    LL_CHECK(b.t_positions[size_t(t)] >= 0 && b.t_positions[size_t(t)] < kv_->max_ctx(),
             "position {} outside the context of {}", b.t_positions[size_t(t)], kv_->max_ctx());
    LL_CHECK(b.t_slots[size_t(t)] >= 0 && b.t_slots[size_t(t)] < slots, "KV slot {} out of range",
             b.t_slots[size_t(t)]);
    LL_CHECK(b.t_req_idx[size_t(t)] >= 0 && b.t_req_idx[size_t(t)] < kv_->max_reqs(),
             "request row {} out of range", b.t_req_idx[size_t(t)]);
  }
  for (int i = 0; i < s.num_seqs; ++i) {
    const int32_t run_slot = b.b_kv_runs[2 * size_t(i)], run_len = b.b_kv_runs[2 * size_t(i) + 1];
    LL_CHECK(run_len >= 0 && run_len <= b.b_seq_len[size_t(i)] && (run_len == 0 || (run_slot >= 0 && run_slot <= slots - run_len)),
             "KV run of {} slots from {} out of range", run_len, run_slot);
    s.max_q_len = std::max(s.max_q_len, b.b_q_len[size_t(i)]);
    s.max_seq_len = std::max(s.max_seq_len, b.b_seq_len[size_t(i)]);
    if (i >= s.num_decode_seqs) s.max_prefill_seq_len = std::max(s.max_prefill_seq_len, b.b_seq_len[size_t(i)]);
  }
  int32_t* h = meta_host_.data();
  auto put = [&](size_t off, const std::vector<int32_t>& v) {
    std::copy(v.begin(), v.end(), h + off);
  };
  put(m_ids_, b.t_token_ids), put(m_pos_, b.t_positions), put(m_slots_, b.t_slots);
  put(m_treq_, b.t_req_idx), put(m_qstart_, b.b_q_start), put(m_qlen_, b.b_q_len);
  put(m_seqlen_, b.b_seq_len), put(m_breq_, b.b_req_idx), put(m_rows_, b.logit_rows);
  put(m_kvrun_, b.b_kv_runs);
  if (shard_.active()) {
    // The embedding shard's rows: another rank's token reads the zero row at vocab_rows_.
    const int64_t v0 = int64_t(shard_.rank) * vocab_rows_;
    for (int t = 0; t < s.num_tokens; ++t) {
      const int64_t id = int64_t(h[m_ids_ + size_t(t)]) - v0;
      h[m_ids_ + size_t(t)] = int32_t(id >= 0 && id < vocab_rows_ ? id : vocab_rows_);
    }
  }
  // Only the entries this step uses (the arrays are sized for the largest step: one copy of all
  // of them moved 4 * max_tokens ints a step from pageable memory, ~130 KB at 8,192 tokens).
  int32_t* d = meta_.as<int32_t>();
  for (size_t off : {m_ids_, m_pos_, m_slots_, m_treq_})
    be_.copy_to_device(d + off, h + off, size_t(s.num_tokens) * sizeof(int32_t));
  be_.copy_to_device(d + m_qstart_, h + m_qstart_, (meta_host_.size() - m_qstart_) * sizeof(int32_t));
  return s;
}

void Decoder::write_table(int32_t req_row, int32_t start_pos, const int32_t* slots, int n) {
  LL_CHECK(kv_ != nullptr, "decoder has no KV cache");
  LL_CHECK(req_row >= 0 && req_row < kv_->max_reqs() && start_pos >= 0 && start_pos + n <= kv_->max_ctx(),
           "table entries of row {} at {}..{} out of range", req_row, start_pos, start_pos + n);
  const int chunk = max_tokens_;
  int32_t* h = table_host_.data();
  int32_t* d = table_meta_.as<int32_t>();
  for (int i0 = 0; i0 < n; i0 += chunk) {
    const int c = std::min(chunk, n - i0);
    for (int i = 0; i < c; ++i) {
      LL_CHECK(slots[i0 + i] >= 0 && slots[i0 + i] < kv_->num_slots(), "KV slot {} out of range", slots[i0 + i]);
      h[i] = req_row, h[chunk + i] = start_pos + i0 + i, h[2 * chunk + i] = slots[i0 + i];
    }
    // Stream order keeps a chunk's upload after the previous chunk's kernel.
    for (int part = 0; part < 3; ++part)
      be_.copy_to_device(d + part * chunk, h + part * chunk, size_t(c) * sizeof(int32_t));
    be_.write_slot_table(kv_->req_to_slot(), kv_->req_stride(), d, d + chunk, d + 2 * chunk, c);
  }
}

std::pair<int, int> Decoder::tune_linears(const std::vector<int>& batch_sizes) {
  // As run() calls them: q|k|v and gate|up write activations, o and down the residual's dtype,
  // the LM head fp32 logits (this rank's columns under tensor parallelism).
  std::map<std::tuple<int64_t, int64_t, int, bool, int>, std::vector<const ops::Linear*>> groups;
  auto add = [&](const ops::Linear& w, DType out) {
    if (w.parts.size() != 1) return;
    groups[{w.out_features, w.in_features, int(w.parts[0].dtype), w.bias.data != nullptr, int(out)}].push_back(&w);
  };
  for (const LayerWeights& lw : w_.layers) {
    add(lw.qkv, be_.act_dtype());
    add(lw.o, be_.residual_dtype());
    if (!lw.moe) add(lw.gate_up, be_.act_dtype()), add(lw.down, be_.residual_dtype());
  }
  add(w_.lm_head, DType::F32);
  std::pair<int, int> n{0, 0};
  for (const auto& [key, same] : groups) {
    const auto [made, changed] = be_.tune_linears(same, DType(std::get<4>(key)), batch_sizes);
    n.first += made, n.second += changed;
  }
  return n;
}

Tensor Decoder::run(const StepShape& s) {
  const int64_t T = s.num_tokens, H = cfg_.hidden_size, F = dense_ffn(cfg_);
  last_tokens_ = s.num_tokens;
  const int Hq = int(cfg_.num_heads), Hkv = int(cfg_.num_kv_heads), D = int(cfg_.head_dim);
  const float eps = cfg_.rms_norm_eps;
  const int32_t* md = meta_.as<int32_t>();

  ops::AttnMeta am;
  am.num_seqs = s.num_seqs;
  am.num_tokens = s.num_tokens;
  am.num_decode_seqs = s.num_decode_seqs;
  am.max_q_len = s.max_q_len;
  // The context limit, not this step's longest sequence: the flash-decoding split count then
  // depends on the batch size only, as in the captured graphs, so eager and graph runs give
  // bit-identical results.
  am.max_seq_len = kv_->max_ctx();
  am.max_prefill_seq_len = s.max_prefill_seq_len;
  am.b_q_start = md + m_qstart_;
  am.b_q_len = md + m_qlen_;
  am.b_seq_len = md + m_seqlen_;
  am.b_req_idx = md + m_breq_;
  am.req_to_slot = kv_->req_to_slot();
  am.req_stride = kv_->req_stride();
  am.b_kv_runs = md + m_kvrun_;
  am.workspace = attn_ws_.data();

  Tensor x = resid(off_x_, T, H), h = act(off_h_, T, H);
  Tensor qkv = act(off_qkv_, T, int64_t(Hq + 2 * Hkv) * D), q = act(off_q_, T, int64_t(Hq) * D);
  Tensor attn = act(off_attn_, T, int64_t(Hq) * D), o = resid(off_o_, T, H);
  Tensor gu = act(off_gu_, T, 2 * F), mlp = act(off_mlp_, T, F), down = resid(off_down_, T, H);

  be_.write_slot_table(kv_->req_to_slot(), kv_->req_stride(), md + m_treq_, md + m_pos_,
                       md + m_slots_, s.num_tokens);
  // Under tensor parallelism each rank's embedding shard gives one real row or zeros: those
  // partial sums go where the MLP output goes in later layers, onto a zero residual, so that the
  // first layer's norm all-reduces them as every later norm does (one fused kernel, not a
  // separate all-reduce and norm).
  if (shard_.active()) {
    be_.zero(x);
    be_.embedding(w_.embed, md + m_ids_, s.num_tokens, down);
  } else {
    be_.embedding(w_.embed, md + m_ids_, s.num_tokens, x);
  }
  const float scale = 1.0f / std::sqrt(float(D));
  for (int l = 0; l < int(cfg_.num_layers); ++l) {
    const LayerWeights& lw = w_.layers[size_t(l)];
    // The row-parallel O and down projections' partial sums are all-reduced inside the next add +
    // RMSNorm (a plain add + RMSNorm on one rank).
    if (l == 0 && !shard_.active())
      be_.rms_norm(x, lw.attn_norm, eps, h);
    else
      be_.all_reduce_add_rms_norm(x, down, lw.attn_norm, eps, h);  // the previous layer's MLP output
    if (cfg_.qk_norm ||
        !be_.linear_rope_store(h, lw.qkv, md + m_pos_, md + m_slots_, rope_, Hq, Hkv, D, kv_->layer(l), q)) {
      be_.linear(h, lw.qkv, qkv);
      be_.qkv_rope_store(qkv, cfg_.qk_norm ? &lw.q_norm : nullptr,
                         cfg_.qk_norm ? &lw.k_norm : nullptr, eps, md + m_pos_, md + m_slots_, rope_,
                         Hq, Hkv, D, kv_->layer(l), q);
    }
    be_.attention(q, kv_->layer(l), am, Hq, Hkv, D, scale, attn);
    be_.linear(attn, lw.o, o);
    be_.all_reduce_add_rms_norm(x, o, lw.ffn_norm, eps, h);
    if (lw.moe) {
      const int k = int(cfg_.num_experts_per_tok);
      int32_t* route_expert = moe_.as<int32_t>();
      float* route_weight = reinterpret_cast<float*>(moe_.as<uint8_t>() + size_t(max_tokens_) * size_t(k) * 4);
      Tensor router = act(off_router_, T, cfg_.num_experts);
      be_.linear(h, lw.router, router);
      be_.moe_route(router, k, cfg_.norm_topk_prob, route_expert, route_weight);
      be_.moe_experts(h, lw.experts, route_expert, route_weight, k, moe_.as<uint8_t>() + moe_ws_offset_, down);
    } else if (be_.linear_swiglu(h, lw.gate_up, mlp)) {
      be_.linear(mlp, lw.down, down);
    } else {
      be_.linear(h, lw.gate_up, gu);
      be_.swiglu_linear(gu, lw.down, mlp, down);
    }
  }
  // Only the rows whose logits are wanted go through the final norm and the LM head.
  const int n = s.num_logits;
  if (n == 0) return Tensor(logits_.data(), DType::F32, {0, logit_cols_}, be_.device());
  Tensor xl = resid(off_xl_, n, H), dl = resid(off_dl_, n, H);
  be_.gather_rows(x, md + m_rows_, n, xl);
  be_.gather_rows(down, md + m_rows_, n, dl);
  return head(xl, dl);
}

Tensor Decoder::token_logits(int first, int n) {
  LL_CHECK(first >= 0 && n > 0 && n <= max_seqs_ && first + n <= last_tokens_,
           "decoder: token rows [{}, {}) of a {}-token step, {} at most at once", first, first + n, last_tokens_,
           max_seqs_);
  const int64_t H = cfg_.hidden_size;
  return head(resid(off_x_ + size_t(first) * size_t(H), n, H), resid(off_down_ + size_t(first) * size_t(H), n, H));
}

// The final norm of residual rows `xl` plus their last MLP output `dl` (xl is updated in place),
// then the LM head: logits [rows, V].
Tensor Decoder::head(Tensor xl, Tensor dl) {
  const int64_t n = xl.rows();
  Tensor logits(logits_.data(), DType::F32, {n, logit_cols_}, be_.device());
  Tensor hl = act(off_hl_, n, cfg_.hidden_size);
  be_.all_reduce_add_rms_norm(xl, dl, w_.final_norm, cfg_.rms_norm_eps, hl);  // only these rows' partial sums
  if (!shard_.active()) {
    be_.linear(hl, w_.lm_head, logits);
    return logits;
  }
  // Vocab-parallel LM head: each rank's columns, then gathered into the whole row on every rank.
  Tensor local = lm_local(int(n));
  be_.linear(hl, w_.lm_head, local);
  be_.all_gather_cols(local, vocab_rows_, logits, gather_ws_.data());
  return logits;
}

}  // namespace lite_llama

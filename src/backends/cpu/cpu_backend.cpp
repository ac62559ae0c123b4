#include "backends/cpu/cpu_backend.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "backends/cpu/cpu_attention.h"
#include "backends/cpu/cpu_moe.h"
#include "backends/cpu/cpu_weights.h"
#include "backends/cpu/gemm_f32.h"
#include "backends/cpu/ref_ops.h"
#include "backends/cpu/vec_dot.h"
#include "ops/score_row.h"
#include "core/error.h"
#include "core/gq.h"
#include "core/half.h"
#include "core/hash_random.h"
#include "core/quant.h"

namespace lite_llama::cpu {
namespace {

constexpr int kRowBlock = 16;  // weight rows per task: keeps the block in L1 while tokens stream

void check_f32(const Tensor& t, const char* what) {
  LL_CHECK(t.dtype == DType::F32, "cpu backend: {} must be F32, got {}", what, dtype_name(t.dtype));
}

float row_inv_rms(const float* x, int64_t n, float eps) {
  float ss = 0;
  for (int64_t i = 0; i < n; ++i) ss += x[i] * x[i];
  return 1.0f / std::sqrt(ss / float(n) + eps);
}

void norm_heads(float* x, int heads, int d, const float* w, float eps) {
  for (int h = 0; h < heads; ++h) {
    float* v = x + int64_t(h) * d;
    float inv = row_inv_rms(v, d, eps);
    for (int i = 0; i < d; ++i) v[i] = v[i] * inv * w[i];
  }
}

class CpuBackend final : public ops::Backend {
 public:
  CpuBackend(int threads, const CpuTuning& tuning, std::shared_ptr<CpuTpGroup> group, int rank)
      : q8_activations_(tuning.q8_activations),
        int16_activations_(tuning.int16_activations),
        kv_f16_(tuning.kv_f16),
        k_(kernels_for(choose_cpu_isa(tuning.isa))),
        pool_(threads, tuning.pin_threads),
        tp_(std::move(group)),
        rank_(rank) {}

  int tp_rank() const override { return rank_; }
  int tp_size() const override { return tp_ ? tp_->size() : 1; }
  void all_reduce(Tensor x) override {
    if (!tp_) return;
    check_f32(x, "all_reduce");
    tp_->all_reduce(rank_, x.ptr<float>(), x.numel());
  }
  void all_gather_cols(const Tensor& local, int64_t cols, Tensor out, void*) override {
    if (!tp_) return;
    check_f32(local, "all_gather_cols"), check_f32(out, "all_gather_cols");
    tp_->all_gather_cols(rank_, local.ptr<float>(), local.cols(), cols, out.ptr<float>(), out.rows(), out.cols());
  }

  Device device() const override { return Device::CPU; }
  DType act_dtype() const override { return DType::F32; }
  DType kv_dtype() const override { return kv_f16_ ? DType::F16 : DType::F32; }
  std::string name() const override {
    return fmt::format("cpu ({} threads, {} kernels{}{})", pool_.size(), cpu_isa_name(k_.isa),
                       q8_activations_       ? ", int8 activations"
                       : int16_activations_ ? ", int16 activation codes"
                                            : "",
                       kv_f16_ ? ", F16 KV" : "");
  }

  Buffer alloc(size_t bytes) override { return host_buffer(bytes); }
  void copy_to_device(void* dst, const void* src, size_t n) override { std::memcpy(dst, src, n); }
  void copy_to_host(void* dst, const void* src, size_t n) override { std::memcpy(dst, src, n); }
  void synchronize() override {}

  Tensor prepare_weight(const Tensor& host, std::vector<Buffer>& keep) override {
    return prepare_cpu_weight(pool_, host, keep);
  }
  Tensor upload(const Tensor& host, std::vector<Buffer>& keep) override { return host; }
  Tensor random_weight(int64_t rows, int64_t cols, uint64_t seed, float scale, std::vector<Buffer>& keep,
                       bool) override {
    Buffer b = host_buffer(size_t(rows * cols) * 2);
    auto* p = b.as<uint16_t>();
    pool_.parallel_for(rows * cols, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) p[i] = f32_to_bf16(hash_uniform(seed, uint64_t(i), scale));
    });
    Tensor t(b.data(), DType::BF16, {rows, cols});
    keep.push_back(std::move(b));
    return t;
  }
  ops::Linear prepare_linear(const ops::Linear& host, std::vector<Buffer>& keep) override {
    ops::Linear l = host;
    for (Tensor& p : l.parts) p = prepare_cpu_weight(pool_, p, keep);
    return l;
  }
  ops::MoeExperts prepare_experts(const ops::MoeExperts& host, uint64_t seed, std::vector<Buffer>& keep) override {
    ops::MoeExperts w = host;
    if (!host.gate.empty() && host.gate[0].data == nullptr) return random_experts(host, seed, keep);
    for (auto* list : {&w.gate, &w.up, &w.down})
      for (Tensor& t : *list) t = prepare_cpu_weight(pool_, t, keep);
    return w;
  }
  void moe_route(const Tensor& logits, int top_k, bool norm_topk_prob, int32_t* t_expert,
                 float* t_weight) override {
    moe_route_f32(pool_, logits, top_k, norm_topk_prob, t_expert, t_weight);
  }
  size_t moe_workspace_bytes(int max_tokens, int top_k, const ops::MoeExperts& w) const override {
    return moe_workspace_f32(max_tokens, top_k, w);
  }
  void moe_experts(const Tensor& x, const ops::MoeExperts& w, const int32_t* t_expert,
                   const float* t_weight, int top_k, void* workspace, Tensor out) override {
    cpu::LinearFn lin;
    const bool q8 = q8_activations_ && !w.gate.empty() &&
                    (uses_q8_activations(w.gate[0].dtype) || uses_q8_activations(w.down[0].dtype));
    if (q8)
      lin = [&](const Tensor& in, const ops::Linear& l, Tensor o) { linear(in, l, o); };
    auto act = [&](const Tensor& gu, Tensor o) { swiglu(gu, o); };
    moe_experts_f32(pool_, k_, x, w, t_expert, t_weight, top_k, workspace, out, lin, act);
  }

  void embedding(const Tensor& table, const int32_t* ids, int n, Tensor out) override {
    check_f32(out, "embedding output");
    int64_t dim = table.cols(), vocab = table.rows();
    for (int i = 0; i < n; ++i) {
      LL_CHECK(ids[i] >= 0 && ids[i] < vocab, "token id {} out of range [0, {})", ids[i], vocab);
      dequantize_row(table.dtype, table.row(ids[i]), out.ptr<float>() + i * dim, dim);
    }
  }

  void zero(Tensor x) override { std::memset(x.data, 0, x.nbytes()); }

  void rms_norm(const Tensor& x, const Tensor& w, float eps, Tensor out) override {
    int64_t n = x.cols();
    const float* wp = w.ptr<float>();
    pool_.parallel_for(x.rows(), [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) {
        const float* xr = x.ptr<float>() + r * n;
        float* o = out.ptr<float>() + r * n;
        float inv = row_inv_rms(xr, n, eps);
        for (int64_t i = 0; i < n; ++i) o[i] = xr[i] * inv * wp[i];
      }
    });
  }

  void add_rms_norm(Tensor residual, const Tensor& x, const Tensor& w, float eps,
                    Tensor out) override {
    int64_t n = x.cols();
    const float* wp = w.ptr<float>();
    pool_.parallel_for(x.rows(), [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) {
        float* res = residual.ptr<float>() + r * n;
        const float* xr = x.ptr<float>() + r * n;
        for (int64_t i = 0; i < n; ++i) res[i] += xr[i];
        float inv = row_inv_rms(res, n, eps);
        float* o = out.ptr<float>() + r * n;
        for (int64_t i = 0; i < n; ++i) o[i] = res[i] * inv * wp[i];
      }
    });
  }

  void linear(const Tensor& x, const ops::Linear& w, Tensor out) override {
    check_f32(x, "linear input");
    const int64_t T = x.rows(), K = x.cols(), N = out.cols();
    LL_CHECK(K == w.in_features && N == w.out_features && out.rows() == T,
             "linear: shapes x{} out{} do not match weight [{}, {}]", x.shape_str(),
             out.shape_str(), w.out_features, w.in_features);
    float* o = out.ptr<float>();
    int64_t col0 = 0;
    int i16_order = -1;  // the layout x's int16 codes are in for this call (-1: none yet)
    for (const Tensor& part : w.parts) {
      const int64_t rows = part.rows();
      const size_t rb = part.row_nbytes();
      if (q8_activations_ && uses_q8_activations(part.dtype)) {
        linear_q8(x, part, o + col0, N);
      } else if (int16_activations_ && K % kQK == 0 && int16_weight_type(part.dtype)) {
        linear_i16(x, part, o + col0, N, i16_order);
      } else {
        pool_.parallel_for(rows, [&](int64_t b, int64_t e) {
          gemm_f32(k_, part.dtype, static_cast<const uint8_t*>(part.data) + size_t(b) * rb, rb, e - b,
                   x.ptr<float>(), T, K, o + col0 + b, N);
        }, kRowBlock);
      }
      col0 += rows;
    }
    if (w.bias.data) {
      const float* bias = w.bias.ptr<float>();
      for (int64_t t = 0; t < T; ++t)
        for (int64_t n = 0; n < N; ++n) o[t * N + n] += bias[n];
    }
  }

  void qkv_rope_store(const Tensor& qkv, const Tensor* q_norm, const Tensor* k_norm, float eps,
                      const int32_t* t_positions, const int32_t* t_slots,
                      const ops::RopeTable& rope, int num_heads, int num_kv_heads, int head_dim,
                      ops::KvLayer kv, Tensor q_out) override {
    const int64_t T = qkv.rows();
    const int64_t max_pos = rope.cos_sin.rows();
    const int64_t q_row = int64_t(num_heads) * head_dim, kv_row = int64_t(num_kv_heads) * head_dim;
    // Checked here: an exception must not escape a worker thread.
    for (int64_t t = 0; t < T; ++t)
      LL_CHECK(t_positions[t] >= 0 && t_positions[t] < max_pos,
               "position {} beyond the rotary table ({})", t_positions[t], max_pos);
    const bool f16 = kv.k.dtype == DType::F16;
    pool_.parallel_for(T, [&](int64_t b, int64_t e) {
      thread_local std::vector<float> k_tmp;  // K in fp32 before it is rounded to an F16 slot
      if (f16 && k_tmp.size() < size_t(kv_row)) k_tmp.resize(size_t(kv_row));
      for (int64_t t = b; t < e; ++t) {
        const float* src = qkv.ptr<float>() + t * (q_row + 2 * kv_row);
        const float* cs = rope.cos_sin.ptr<float>() + int64_t(t_positions[t]) * rope.rot_dim;
        float* q = q_out.ptr<float>() + t * q_row;
        const int64_t at = int64_t(t_slots[t]) * kv_row;
        float* k = f16 ? k_tmp.data() : kv.k.ptr<float>() + at;
        std::memcpy(q, src, size_t(q_row) * 4);
        std::memcpy(k, src + q_row, size_t(kv_row) * 4);
        if (q_norm) norm_heads(q, num_heads, head_dim, q_norm->ptr<float>(), eps);
        if (k_norm) norm_heads(k, num_kv_heads, head_dim, k_norm->ptr<float>(), eps);
        ref::rope(q, num_heads, head_dim, cs, rope.rot_dim, rope.layout);
        ref::rope(k, num_kv_heads, head_dim, cs, rope.rot_dim, rope.layout);
        if (f16) {
          uint16_t* kd = kv.k.ptr<uint16_t>() + at;
          uint16_t* vd = kv.v.ptr<uint16_t>() + at;
          for (int64_t i = 0; i < kv_row; ++i) {
            kd[i] = f32_to_f16(k[i]);
            vd[i] = f32_to_f16(src[q_row + kv_row + i]);
          }
        } else {
          std::memcpy(kv.v.ptr<float>() + at, src + q_row + kv_row, size_t(kv_row) * 4);
        }
      }
    });
  }

  void write_slot_table(int32_t* req_to_slot, int stride, const int32_t* t_req_idx,
                        const int32_t* t_positions, const int32_t* t_slots, int n) override {
    for (int t = 0; t < n; ++t)
      req_to_slot[int64_t(t_req_idx[t]) * stride + t_positions[t]] = t_slots[t];
  }

  void attention(const Tensor& q, const ops::KvLayer& kv, const ops::AttnMeta& m, int num_heads,
                 int num_kv_heads, int head_dim, float scale, Tensor out) override {
    attention_f32(pool_, k_, q, kv, m, num_heads, num_kv_heads, head_dim, scale, out, attn_);
  }

  void swiglu(const Tensor& gate_up, Tensor out) override {
    const int64_t F = out.cols();
    pool_.parallel_for(out.rows(), [&](int64_t b, int64_t e) {
      for (int64_t t = b; t < e; ++t) {
        const float* g = gate_up.ptr<float>() + t * 2 * F;
        const float* u = g + F;
        float* o = out.ptr<float>() + t * F;
        k_.swiglu(g, u, o, F);
      }
    });
  }

  void argmax(const Tensor& logits, int rows, int limit, int32_t* out) override {
    const int64_t V = logits.cols();
    for (int r = 0; r < rows; ++r) {
      const float* l = logits.ptr<float>() + r * V;
      int best = 0;
      for (int i = 1; i < limit; ++i)
        if (l[i] > l[best]) best = i;
      out[r] = best;
    }
  }

  bool score_rows(const Tensor& logits, int rows, int limit, const int32_t* targets, int top_k, ops::RowScore* out,
                  ops::TopToken* top) override {
    if (top_k < 0 || top_k > kMaxTopLogprobs) return false;
    pool_.parallel_for(rows, [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r)
        ops::score_row(logits.ptr<float>() + r * logits.cols(), limit, targets[r], top_k, out + r, top + r * top_k);
    });
    return true;
  }

  void gather_rows(const Tensor& x, const int32_t* rows, int n, Tensor out) override {
    const size_t rb = x.row_nbytes();
    for (int i = 0; i < n; ++i) std::memcpy(out.row(i), x.row(rows[i]), rb);
  }

  // Dummy experts: one BF16 buffer per layer and projection, sliced per expert.
  ops::MoeExperts random_experts(const ops::MoeExperts& host, uint64_t seed, std::vector<Buffer>& keep) {
    ops::MoeExperts w = host;
    uint64_t s = seed;
    for (auto* list : {&w.gate, &w.up, &w.down}) {
      const int64_t rows = (*list)[0].rows(), cols = (*list)[0].cols(), E = int64_t(list->size());
      Tensor all = random_weight(E * rows, cols, s++, 1.0f / std::sqrt(float(cols)), keep, false);
      for (int64_t e = 0; e < E; ++e) (*list)[size_t(e)] = all.slice_rows(e * rows, rows);
    }
    return w;
  }

  // CpuTuning::int16_activations: x's int16 codes (made once per call and layout, a token per
  // task) against row ranges of the weight on every thread, in blocks of tokens whose codes stay
  // in cache. Every T takes this path, prefill included, so that a token's result never depends
  // on the step it is in (seeded sampling, prefix caching).
  void linear_i16(const Tensor& x, const Tensor& part, float* out, int64_t ldo, int& order) {
    const int64_t T = x.rows(), K = part.cols();
    const bool q4 = int16_q4_order(part.dtype);
    const size_t nb = size_t(K / kQK);
    if (order != int(q4)) {
      if (i16_q_.size() < size_t(T * K)) i16_q_.resize(size_t(T * K));
      if (i16_f_.size() < 2 * size_t(T) * nb) i16_f_.resize(2 * size_t(T) * nb);
      if (i16_qsum_.size() < size_t(T) * nb) i16_qsum_.resize(size_t(T) * nb);
      i16_ = {i16_q_.data(), i16_f_.data(), i16_f_.data() + size_t(T) * nb, i16_qsum_.data()};
      pool_.parallel_for(T, [&](int64_t b, int64_t e) {
        for (int64_t t = b; t < e; ++t)
          k_.quantize_i16(x.ptr<float>() + t * K, K, q4,
                          ActI16{i16_.q + t * K, i16_.d + size_t(t) * nb, i16_.sum + size_t(t) * nb,
                                 i16_.qsum + size_t(t) * nb});
      });
      order = int(q4);
    }
    const size_t rb = part.row_nbytes();
    constexpr int64_t kTokenBlock = 64;  // 64 x K int16 codes: 192 KiB at K = 1,536
    pool_.parallel_for(part.rows(), [&](int64_t b, int64_t e) {
      for (int64_t t0 = 0; t0 < T; t0 += kTokenBlock) {
        const ActI16 xt{i16_.q + t0 * K, i16_.d + size_t(t0) * nb, i16_.sum + size_t(t0) * nb,
                        i16_.qsum + size_t(t0) * nb};
        k_.gemm_i16(part.dtype, static_cast<const uint8_t*>(part.data) + size_t(b) * rb, rb, e - b, xt,
                    int(std::min(kTokenBlock, T - t0)), K, out + t0 * ldo + b, ldo);
      }
    }, kRowBlock);
  }

  // Alternative path (CpuTuning::q8_activations): activations quantised to Q8_1 and integer dot
  // products, as llama.cpp does; faster on some machines, not bit-close to an fp32 reference.
  void linear_q8(const Tensor& x, const Tensor& part, float* out, int64_t ldo) {
    const int64_t T = x.rows(), K = x.cols();
    LL_CHECK(K % kQK == 0, "linear: K={} must be a multiple of {}", K, kQK);
    const size_t nb = size_t(K / kQK);
    if (q8_.size() < size_t(T) * nb) q8_.resize(size_t(T) * nb);
    pool_.parallel_for(T, [&](int64_t b, int64_t e) {
      for (int64_t t = b; t < e; ++t) quantize_q8_1(x.ptr<float>() + t * K, &q8_[size_t(t) * nb], K);
    });
    const size_t rb = part.row_nbytes();
    pool_.parallel_for(part.rows(), [&](int64_t b, int64_t e) {
      float tmp[kRowBlock];
      for (int64_t r0 = b; r0 < e; r0 += kRowBlock) {
        int nr = int(std::min<int64_t>(kRowBlock, e - r0));
        const uint8_t* wr = static_cast<const uint8_t*>(part.data) + size_t(r0) * rb;
        for (int64_t t = 0; t < T; ++t) {
          vec_dot_rows(part.dtype, wr, rb, nr, &q8_[size_t(t) * nb], K, tmp);
          std::memcpy(out + t * ldo + r0, tmp, size_t(nr) * sizeof(float));
        }
      }
    }, kRowBlock);
  }

 private:
  const bool q8_activations_;
  const bool int16_activations_;
  const bool kv_f16_;
  const Kernels& k_;
  ThreadPool pool_;
  std::shared_ptr<CpuTpGroup> tp_;
  int rank_ = 0;
  std::vector<BlockQ8_1> q8_;
  std::vector<int16_t> i16_q_;
  std::vector<float> i16_f_;
  std::vector<int32_t> i16_qsum_;
  ActI16 i16_{};
  AttnScratch attn_;
};

}  // namespace

std::unique_ptr<ops::Backend> make_cpu_backend(int num_threads, const CpuTuning& tuning,
                                               std::shared_ptr<CpuTpGroup> group, int rank) {
  return std::make_unique<CpuBackend>(num_threads, tuning, std::move(group), rank);
}

}  // namespace lite_llama::cpu

#include "backends/cpu/cpu_backend.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "backends/cpu/gemm_f32.h"
#include "backends/cpu/ref_ops.h"
#include "backends/cpu/vec_dot.h"
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

// (sequence, head, query range) unit of attention work.
struct AttnItem {
  int b, h, q0, q1;
};

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
  explicit CpuBackend(int threads) : pool_(threads) {}

  Device device() const override { return Device::CPU; }
  DType act_dtype() const override { return DType::F32; }
  std::string name() const override {
    return fmt::format("cpu ({} threads, {}{})", pool_.size(), gemm_f32_isa(),
                       q8_activations_ ? ", int8 activations" : "");
  }

  Buffer alloc(size_t bytes) override { return host_buffer(bytes); }
  void copy_to_device(void* dst, const void* src, size_t n) override { std::memcpy(dst, src, n); }
  void copy_to_host(void* dst, const void* src, size_t n) override { std::memcpy(dst, src, n); }
  void synchronize() override {}

  Tensor prepare_weight(const Tensor& host, std::vector<Buffer>& keep) override {
    if (is_gq(host.dtype) || host.dtype == DType::Q5_0 || host.dtype == DType::Q5_1) return converted(host, keep);
    LL_CHECK(host.dtype == DType::F32 || host.dtype == DType::F16 || host.dtype == DType::BF16 ||
                 uses_q8_activations(host.dtype) || host.dtype == DType::Q4_K ||
                 host.dtype == DType::Q5_K || host.dtype == DType::Q6_K,
             "cpu backend: weights of type {} are not supported", dtype_name(host.dtype));
    return host;
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
    for (Tensor& p : l.parts) p = prepare_weight(p, keep);
    return l;
  }
  // Weight types without CPU kernels, converted once at load into a new buffer: Q5_0 / Q5_1
  // (llama.cpp's fallback for rows that K-quants cannot hold) and the GPU layouts of GPTQ / AWQ /
  // FP8 checkpoints. Q5_0 becomes Q8_0 exactly (same scale, codes - 16); Q5_1 (scale and offset)
  // F16; GQ rows BF16 (2 bytes per weight instead of ~0.5).
  Tensor converted(const Tensor& host, std::vector<Buffer>& keep) {
    const int64_t rows = host.rows(), cols = host.cols();
    const DType to = host.dtype == DType::Q5_0 ? DType::Q8_0 : host.dtype == DType::Q5_1 ? DType::F16 : DType::BF16;
    const size_t rb = row_bytes(to, cols);
    Buffer b = host_buffer(rb * size_t(rows));
    pool_.parallel_for(rows, [&](int64_t lo, int64_t hi) {
      std::vector<float> f(static_cast<size_t>(cols));
      for (int64_t r = lo; r < hi; ++r) {
        auto* dst = b.as<uint8_t>() + size_t(r) * rb;
        if (to == DType::Q8_0) {
          q5_0_to_q8_0(host.row(r), dst, cols);
        } else {
          dequantize_row(host.dtype, host.row(r), f.data(), cols);
          quantize_row(to, f.data(), dst, cols);
        }
      }
    });
    Tensor t(b.data(), to, {rows, cols});
    keep.push_back(std::move(b));
    return t;
  }

  void embedding(const Tensor& table, const int32_t* ids, int n, Tensor out) override {
    check_f32(out, "embedding output");
    int64_t dim = table.cols(), vocab = table.rows();
    for (int i = 0; i < n; ++i) {
      LL_CHECK(ids[i] >= 0 && ids[i] < vocab, "token id {} out of range [0, {})", ids[i], vocab);
      dequantize_row(table.dtype, table.row(ids[i]), out.ptr<float>() + i * dim, dim);
    }
  }

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
    for (const Tensor& part : w.parts) {
      const int64_t rows = part.rows();
      const size_t rb = part.row_nbytes();
      if (q8_activations_ && uses_q8_activations(part.dtype)) {
        linear_q8(x, part, o + col0, N);
      } else {
        pool_.parallel_for(rows, [&](int64_t b, int64_t e) {
          gemm_f32(part.dtype, static_cast<const uint8_t*>(part.data) + size_t(b) * rb, rb, e - b,
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
    pool_.parallel_for(T, [&](int64_t b, int64_t e) {
      for (int64_t t = b; t < e; ++t) {
        const float* src = qkv.ptr<float>() + t * (q_row + 2 * kv_row);
        const float* cs = rope.cos_sin.ptr<float>() + int64_t(t_positions[t]) * rope.rot_dim;
        float* q = q_out.ptr<float>() + t * q_row;
        float* k = kv.k.ptr<float>() + int64_t(t_slots[t]) * kv_row;
        std::memcpy(q, src, size_t(q_row) * 4);
        std::memcpy(k, src + q_row, size_t(kv_row) * 4);
        std::memcpy(kv.v.ptr<float>() + int64_t(t_slots[t]) * kv_row, src + q_row + kv_row,
                    size_t(kv_row) * 4);
        if (q_norm) norm_heads(q, num_heads, head_dim, q_norm->ptr<float>(), eps);
        if (k_norm) norm_heads(k, num_kv_heads, head_dim, k_norm->ptr<float>(), eps);
        ref::rope(q, num_heads, head_dim, cs, rope.rot_dim, rope.layout);
        ref::rope(k, num_kv_heads, head_dim, cs, rope.rot_dim, rope.layout);
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
    const int group = num_heads / num_kv_heads;
    const int64_t kv_row = int64_t(num_kv_heads) * head_dim;
    // Work items: (sequence, head, query chunk) so that both decode batches and one long
    // prefill spread across threads.
    std::vector<AttnItem>& items = attn_items_;
    items.clear();
    for (int b = 0; b < m.num_seqs; ++b) {
      int ql = m.b_q_len[b];
      int chunk = std::max(1, std::min(ql, 64));
      for (int h = 0; h < num_heads; ++h)
        for (int q0 = 0; q0 < ql; q0 += chunk) items.push_back({b, h, q0, std::min(ql, q0 + chunk)});
    }
    pool_.parallel_for(int64_t(items.size()), [&](int64_t ib, int64_t ie) {
      std::vector<float> scores;
      std::vector<float> acc(static_cast<size_t>(head_dim));
      for (int64_t it = ib; it < ie; ++it) {
        const AttnItem& w = items[size_t(it)];
        const int seq_len = m.b_seq_len[w.b], q_len = m.b_q_len[w.b];
        const int32_t* slots = m.req_to_slot + int64_t(m.b_req_idx[w.b]) * m.req_stride;
        const int g = w.h / group;
        const float* kbase = kv.k.ptr<float>() + g * head_dim;
        const float* vbase = kv.v.ptr<float>() + g * head_dim;
        for (int i = w.q0; i < w.q1; ++i) {
          const int64_t tok = m.b_q_start[w.b] + i;
          const float* qv = q.ptr<float>() + (tok * num_heads + w.h) * head_dim;
          const int visible = seq_len - q_len + i + 1;  // causal: keys at positions <= query's
          if (int(scores.size()) < visible) scores.resize(size_t(visible));
          float mx = -INFINITY;
          for (int j = 0; j < visible; ++j) {
            float s = vec_dot(DType::F32, kbase + int64_t(slots[j]) * kv_row, qv, head_dim) * scale;
            scores[size_t(j)] = s;
            mx = std::max(mx, s);
          }
          float sum = 0;
          for (int j = 0; j < visible; ++j) sum += (scores[size_t(j)] = std::exp(scores[size_t(j)] - mx));
          std::fill(acc.begin(), acc.end(), 0.f);
          for (int j = 0; j < visible; ++j) {
            const float p = scores[size_t(j)];
            const float* vr = vbase + int64_t(slots[j]) * kv_row;
            for (int d = 0; d < head_dim; ++d) acc[size_t(d)] += p * vr[d];
          }
          float* o = out.ptr<float>() + (tok * num_heads + w.h) * head_dim;
          const float inv = 1.f / sum;
          for (int d = 0; d < head_dim; ++d) o[d] = acc[size_t(d)] * inv;
        }
      }
    });
  }

  void swiglu(const Tensor& gate_up, Tensor out) override {
    const int64_t F = out.cols();
    pool_.parallel_for(out.rows(), [&](int64_t b, int64_t e) {
      for (int64_t t = b; t < e; ++t) {
        const float* g = gate_up.ptr<float>() + t * 2 * F;
        const float* u = g + F;
        float* o = out.ptr<float>() + t * F;
        for (int64_t i = 0; i < F; ++i) o[i] = g[i] / (1.0f + std::exp(-g[i])) * u[i];
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

  void gather_rows(const Tensor& x, const int32_t* rows, int n, Tensor out) override {
    const size_t rb = x.row_nbytes();
    for (int i = 0; i < n; ++i) std::memcpy(out.row(i), x.row(rows[i]), rb);
  }

  // Alternative path (LITE_LLAMA_CPU_Q8=1): activations quantised to Q8_1 and integer dot
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
  bool q8_activations_ = std::getenv("LITE_LLAMA_CPU_Q8") != nullptr;
  ThreadPool pool_;
  std::vector<BlockQ8_1> q8_;
  std::vector<AttnItem> attn_items_;
};

}  // namespace

std::unique_ptr<ops::Backend> make_cpu_backend(int num_threads) {
  return std::make_unique<CpuBackend>(num_threads);
}

}  // namespace lite_llama::cpu

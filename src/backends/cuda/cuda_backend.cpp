#include "backends/cuda/cuda_backend.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/gemm.h"
#include "backends/cuda/launchers.h"
#include "backends/cuda/profiler.h"
#include "core/gq.h"
#include "core/half.h"
#include "core/quant.h"

namespace lite_llama::cuda {
namespace {

constexpr size_t kGemmWorkspace = 32u << 20;

constexpr size_t kDeqElems = 16u << 20;  // dequantised weight tile for GEMMs: 32 MiB, mostly in L2

// Tuning and debugging switches read once per backend: whether variable `name` is set to `value`,
// and an integer variable (dflt when unset).
bool env_is(const char* name, const char* value) {
  const char* e = std::getenv(name);
  return e && std::string(e) == value;
}
int env_int(const char* name, int dflt) {
  const char* e = std::getenv(name);
  return e ? std::atoi(e) : dflt;
}

class CudaBackend final : public ops::Backend {
 public:
  CudaBackend(const std::string& dtype, const std::string& quantize)
      : act_(dtype == "fp16" ? Act::F16 : Act::BF16), qmode_(parse_quant_mode(quantize)), gemm_(kGemmWorkspace) {
    LL_CHECK(dtype == "bf16" || dtype == "fp16", "--dtype must be bf16 or fp16, got '{}'", dtype);
    LL_CUDA(cudaGetDevice(&device_));
    LL_CUDA(cudaGetDeviceProperties(&props_, device_));
    // bf16 math, cp.async and the mma.sync shapes of the kernels need sm_80 (built for 80 and 90).
    LL_CHECK(props_.major >= 8, "{} has compute capability {}.{}; lite-llama's CUDA kernels need 8.0 or newer "
             "(use --device cpu)", props_.name, props_.major, props_.minor);
    LL_CUDA(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  }
  ~CudaBackend() override {
    for (cudaGraphExec_t g : graphs_) cudaGraphExecDestroy(g);
    cudaStreamDestroy(stream_);
  }

  Device device() const override { return Device::CUDA; }
  DType act_dtype() const override { return act_ == Act::BF16 ? DType::BF16 : DType::F16; }
  std::string name() const override {
    return fmt::format("cuda:{} ({}, sm_{}{}, {} SMs, {:.0f} GiB, {})", device_, props_.name,
                       props_.major, props_.minor, props_.multiProcessorCount,
                       double(props_.totalGlobalMem) / (1 << 30), act_ == Act::BF16 ? "bf16" : "fp16");
  }

  Buffer alloc(size_t bytes) override {
    void* p = nullptr;
    if (bytes) {
      cudaError_t e = cudaMalloc(&p, bytes);
      if (e != cudaSuccess) {
        cudaGetLastError();
        fail("out of GPU memory allocating {:.1f} MiB ({})", double(bytes) / (1 << 20),
             cudaGetErrorString(e));
      }
    }
    return Buffer(p, bytes, Device::CUDA, [](void* q) { cudaFree(q); });
  }
  void copy_to_device(void* dst, const void* src, size_t n) override {
    LL_CUDA(cudaMemcpyAsync(dst, src, n, cudaMemcpyHostToDevice, stream_));
  }
  void copy_to_host(void* dst, const void* src, size_t n) override {
    LL_CUDA(cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToHost, stream_));
    LL_CUDA(cudaStreamSynchronize(stream_));
  }
  void synchronize() override { LL_CUDA(cudaStreamSynchronize(stream_)); }
  void memory_info(size_t* free, size_t* total) const override {
    LL_CUDA(cudaMemGetInfo(free, total));
  }

  Tensor upload(const Tensor& host, std::vector<Buffer>& keep) override {
    Buffer b = alloc(host.nbytes());
    copy_sync(b.data(), host.data, host.nbytes());
    Tensor t = host;
    t.data = b.data();
    t.device = Device::CUDA;
    keep.push_back(std::move(b));
    return t;
  }

  Tensor prepare_weight(const Tensor& host, std::vector<Buffer>& keep) override {
    return prepare_matrix({host}, host.rows(), host.cols(), true, keep);
  }

  ops::Linear prepare_linear(const ops::Linear& host, std::vector<Buffer>& keep) override {
    // One fused [N, K] matrix (q|k|v, gate|up): a single GEMM per projection.
    ops::Linear l;
    l.in_features = host.in_features;
    l.out_features = host.out_features;
    l.parts = {prepare_matrix(host.parts, host.out_features, host.in_features, false, keep)};
    if (host.bias.data) l.bias = prepare_bias(host.bias, keep);
    return l;
  }
  // F32 on the device (upload) -> activation type for the epilogue.
  Tensor prepare_bias(const Tensor& bias, std::vector<Buffer>& keep) override {
    LL_CHECK(bias.dtype == DType::F32, "a linear's bias must be F32 before conversion, got {}", dtype_name(bias.dtype));
    const int64_t n = bias.numel();
    Buffer bb = alloc(size_t(n) * 2);
    LL_CUDA(convert_f32(act_, bias.ptr<float>(), bb.data(), size_t(n), stream_));
    Tensor t(bb.data(), act_dtype(), {n}, Device::CUDA);
    keep.push_back(std::move(bb));
    synchronize();
    return t;
  }

  Tensor random_weight(int64_t rows, int64_t cols, uint64_t seed, float scale, std::vector<Buffer>& keep,
                       bool embedding) override {
    Buffer b = alloc(size_t(rows * cols) * 2);
    LL_CUDA(random_fill(act_, b.data(), size_t(rows * cols), seed, scale, stream_));
    synchronize();
    Tensor t(b.data(), act_dtype(), {rows, cols}, Device::CUDA);
    if (auto f = explicit_format(cols, embedding)) return quantize_on_device(t, *f, keep);
    keep.push_back(std::move(b));
    return t;
  }

  void embedding(const Tensor& table, const int32_t* ids, int n, Tensor out) override {
    xq_of_ = nullptr;
    ProfileScope ps(prof_, "embedding", stream_);
    if (is_gq(table.dtype))
      LL_CUDA(dequant_gq(act_, gq_args(table), table.data, ids, 0, n, int(table.cols()), out.data, stream_));
    else
      LL_CUDA(cuda::embedding(table.data, ids, out.data, n, int(table.cols()), stream_));
    check_finite("embedding", out);
  }
  void rms_norm(const Tensor& x, const Tensor& w, float eps, Tensor out) override {
    ProfileScope ps(prof_, "norm", stream_);
    void* xq = quantize_x_for(out, norm_quantizes_x(int(x.rows()), int(x.cols())));
    LL_CUDA(cuda::rms_norm(act_, x.data, w.ptr<float>(), eps, out.data, int(x.rows()), int(x.cols()), stream_, xq));
    check_finite("rms_norm", out);
  }
  void add_rms_norm(Tensor residual, const Tensor& x, const Tensor& w, float eps, Tensor out) override {
    ProfileScope ps(prof_, "norm", stream_);
    void* xq = quantize_x_for(out, norm_quantizes_x(int(x.rows()), int(x.cols())));
    LL_CUDA(cuda::add_rms_norm(act_, residual.data, x.data, w.ptr<float>(), eps, out.data, int(x.rows()),
                               int(x.cols()), stream_, xq));
    check_finite("add_rms_norm (residual)", residual);
    check_finite("add_rms_norm", out);
  }
  void linear(const Tensor& x, const ops::Linear& w, Tensor out) override {
    linear_op(x, w, out);
    check_finite("linear", out);
  }
  void linear_op(const Tensor& x, const ops::Linear& w, Tensor out) {
    ProfileScope ps(prof_, "gemm", stream_);
    const int T = int(x.rows()), K = int(x.cols()), N = int(w.out_features);
    if (T == 0) return;
    const bool f32 = out.dtype == DType::F32;
    const void* bias = w.bias.data;
    struct Forget {  // the output overwrites what the recorded int8 form described
      const void*& of;
      const void* out;
      ~Forget() { if (of == out) of = nullptr; }
    } forget{xq_of_, out.data};
    if (is_gq(w.parts[0].dtype)) return linear_gq(x, w, out, T, N, K, f32);
    // For a few tokens the CUDA-core GEMV streams weights at bandwidth; with more its fp32 math
    // is the limit (8 FLOP per weight byte at 8 tokens), so tensor cores (cuBLASLt) win.
    if (T <= gemv_max_tokens_ && K % 8 == 0) {
      LL_CUDA(gemv(act_, x.data, w.parts[0].data, bias, out.data, f32, T, N, K, N, stream_, pdl_gemv_));
    } else if (f32 && bias) {
      // cuBLASLt wants the bias in the output type; ours is 16-bit, so add it separately.
      gemm_.run(act_, x.data, w.parts[0].data, nullptr, out.data, true, T, N, K, stream_);
      LL_CUDA(add_bias_f32(act_, static_cast<float*>(out.data), bias, T, N, stream_));
    } else {
      gemm_.run(act_, x.data, w.parts[0].data, bias, out.data, f32, T, N, K, stream_);
    }
  }
  void qkv_rope_store(const Tensor& qkv, const Tensor* q_norm, const Tensor* k_norm, float eps,
                      const int32_t* t_positions, const int32_t* t_slots, const ops::RopeTable& rope,
                      int num_heads, int num_kv_heads, int head_dim, ops::KvLayer kv,
                      Tensor q_out) override {
    xq_of_ = nullptr;
    ProfileScope ps(prof_, "rope+kv write", stream_);
    RopeKvArgs a{qkv.data, q_out.data, kv.k.data, kv.v.data,
                 q_norm ? q_norm->ptr<float>() : nullptr, k_norm ? k_norm->ptr<float>() : nullptr, eps,
                 t_positions, t_slots, rope.cos_sin.ptr<float>(), rope.rot_dim,
                 rope.layout == ops::RopeLayout::Interleaved, int(qkv.rows()), num_heads, num_kv_heads,
                 head_dim};
    LL_CUDA(cuda::qkv_rope_store(act_, a, stream_));
    check_finite("qkv_rope_store (q)", q_out);
  }
  void write_slot_table(int32_t* req_to_slot, int stride, const int32_t* t_req_idx,
                        const int32_t* t_positions, const int32_t* t_slots, int n) override {
    xq_of_ = nullptr;
    ProfileScope ps(prof_, "copies", stream_);
    LL_CUDA(cuda::write_slot_table(req_to_slot, stride, t_req_idx, t_positions, t_slots, n, stream_));
  }
  size_t attention_workspace_bytes(int max_seqs, int num_heads, int head_dim) const override {
    // Worst case of decode_splits(): B * splits <= B + 2 * SMs (+ B for rounding).
    const size_t rows = size_t(2 * max_seqs + 2 * props_.multiProcessorCount) * size_t(num_heads);
    return rows * size_t(head_dim + 2) * sizeof(float);
  }
  void attention(const Tensor& q, const ops::KvLayer& kv, const ops::AttnMeta& m, int num_heads,
                 int num_kv_heads, int head_dim, float scale, Tensor out) override {
    xq_of_ = nullptr;
    AttnArgs a{q.data, kv.k.data, kv.v.data, out.data, m.b_q_start, m.b_q_len, m.b_seq_len, m.b_req_idx,
               m.req_to_slot, m.req_stride, 0, 0, m.max_seq_len, num_heads, num_kv_heads, head_dim, scale};
    const int nd = m.num_decode_seqs;
    if (nd > 0) {
      ProfileScope ps(prof_, "attention decode", stream_);
      a.num_seqs = nd;
      a.max_q_len = 1;
      const int splits = decode_splits(nd, num_kv_heads, m.max_seq_len, props_.multiProcessorCount, split_keys_);
      LL_CUDA(attention_decode(act_, a, splits, split_keys_, static_cast<float*>(m.workspace), stream_));
    }
    if (m.num_seqs > nd) {
      a.b_q_start = m.b_q_start + nd;
      a.b_q_len = m.b_q_len + nd;
      a.b_seq_len = m.b_seq_len + nd;
      a.b_req_idx = m.b_req_idx + nd;
      a.num_seqs = m.num_seqs - nd;
      a.max_q_len = m.max_q_len;
      ProfileScope ps(prof_, "attention prefill", stream_);
      LL_CUDA(attention_prefill(act_, a, stream_));
    }
    check_finite(nd == m.num_seqs ? "attention (decode)" : "attention (prefill)", out);
  }
  void swiglu(const Tensor& gate_up, Tensor out) override {
    ProfileScope ps(prof_, "activation", stream_);
    void* xq = quantize_x_for(out, swiglu_quantizes_x(int(out.rows()), int(out.cols())));
    LL_CUDA(cuda::swiglu(act_, gate_up.data, out.data, int(out.rows()), int(out.cols()), stream_, xq));
    check_finite("swiglu", out);
  }
  void gather_rows(const Tensor& x, const int32_t* rows, int n, Tensor out) override {
    xq_of_ = nullptr;
    ProfileScope ps(prof_, "copies", stream_);
    LL_CUDA(cuda::gather_rows(x.data, rows, out.data, n, x.row_nbytes(), stream_));
  }
  void argmax(const Tensor& logits, int rows, int limit, int32_t* out) override {
    ProfileScope ps(prof_, "sampling", stream_);
    LL_CUDA(argmax_rows(logits.ptr<float>(), rows, int(logits.cols()), limit, out, stream_));
  }

  void set_profiling(bool on) override { prof_.enable(on); }
  std::vector<ProfileEntry> profile_report() override { return prof_.report(); }

  bool supports_device_sampling() const override { return true; }
  void reserve_sampling(int max_rows, int max_penalties) override {
    sample_rows_cap_ = max_rows;
    pen_cap_ = max_penalties;
    sample_args_ = alloc(size_t(max_rows) * sizeof(SampleRowArgs));
    pen_buf_ = alloc(size_t(2) * size_t(std::max(1, max_penalties)) * sizeof(int32_t));
  }
  bool sample(const Tensor& logits, int rows, int limit, const std::vector<ops::SampleRow>& params,
              const std::vector<int32_t>& pen_tokens, const std::vector<int32_t>& pen_counts,
              int32_t* out) override {
    static_assert(sizeof(ops::SampleRow) == sizeof(SampleRowArgs), "SampleRow layout");
    if (rows > sample_rows_cap_ || int(pen_tokens.size()) > pen_cap_) return false;
    ProfileScope ps(prof_, "sampling", stream_);
    LL_CUDA(cudaMemcpyAsync(sample_args_.data(), params.data(), size_t(rows) * sizeof(SampleRowArgs),
                            cudaMemcpyHostToDevice, stream_));
    int32_t* toks = pen_buf_.as<int32_t>();
    int32_t* counts = toks + std::max(1, pen_cap_);
    if (!pen_tokens.empty()) {
      LL_CUDA(cudaMemcpyAsync(toks, pen_tokens.data(), pen_tokens.size() * 4, cudaMemcpyHostToDevice, stream_));
      LL_CUDA(cudaMemcpyAsync(counts, pen_counts.data(), pen_counts.size() * 4, cudaMemcpyHostToDevice, stream_));
    }
    LL_CUDA(sample_rows(static_cast<float*>(logits.data), rows, int(logits.cols()), limit,
                        sample_args_.as<SampleRowArgs>(), toks, counts, out, stream_));
    return true;
  }

  bool supports_graphs() const override { return true; }
  int capture_graph(const std::function<void()>& fn) override {
    cudaGraph_t g = nullptr;
    LL_CUDA(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
    try {
      fn();
    } catch (...) {
      cudaStreamEndCapture(stream_, &g);
      if (g) cudaGraphDestroy(g);
      throw;
    }
    LL_CUDA(cudaStreamEndCapture(stream_, &g));
    cudaGraphExec_t exec = nullptr;
    LL_CUDA(cudaGraphInstantiate(&exec, g, 0));
    cudaGraphDestroy(g);
    graphs_.push_back(exec);
    return int(graphs_.size()) - 1;
  }
  void replay_graph(int id) override { LL_CUDA(cudaGraphLaunch(graphs_.at(size_t(id)), stream_)); }

 private:
  // LITE_LLAMA_CHECK_FINITE=1 (debugging): each op's output is copied back and checked, and the
  // first NaN / inf stops the run naming the op (eager steps only: skipped under graph capture).
  void check_finite(const char* op, const Tensor& t) {
    if (!check_finite_) return;
    cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    LL_CUDA(cudaStreamIsCapturing(stream_, &cs));
    if (cs != cudaStreamCaptureStatusNone) return;
    ++checked_ops_;
    std::vector<uint8_t> h(t.nbytes());
    copy_to_host(h.data(), t.data, h.size());
    const size_t n = size_t(t.numel());
    for (size_t i = 0; i < n; ++i) {
      uint16_t u = 0;
      float v = 0.f;
      if (t.dtype == DType::F32) std::memcpy(&v, h.data() + 4 * i, 4);
      else std::memcpy(&u, h.data() + 2 * i, 2), v = t.dtype == DType::BF16 ? bf16_to_f32(u) : f16_to_f32(u);
      if (!std::isfinite(v))
        fail("LITE_LLAMA_CHECK_FINITE: op #{} ({}) wrote {} at element {} of [{} x {}] (row {})", checked_ops_, op, v,
             i, t.rows(), t.cols(), int64_t(i) / std::max<int64_t>(1, t.cols()));
    }
  }

  // Uploads on the backend's own stream (a plain cudaMemcpy runs on the legacy stream, which the
  // non-blocking op stream does not wait for).
  void copy_sync(void* dst, const void* src, size_t n) {
    LL_CUDA(cudaMemcpyAsync(dst, src, n, cudaMemcpyHostToDevice, stream_));
    LL_CUDA(cudaStreamSynchronize(stream_));
  }

  // Host tensor of any supported storage type -> 16-bit rows on the device.
  void upload_rows(const Tensor& host, uint8_t* dst) {
    const int64_t cols = host.cols();
    if (host.dtype == act_dtype()) {
      copy_sync(dst, host.data, host.nbytes());
      return;
    }
    upload_rows(host, dst, size_t(cols) * 2, [&](const void* src, void* out) {
      thread_local std::vector<float> f;  // one row of floats per uploading thread
      f.resize(static_cast<size_t>(cols));
      dequantize_row(host.dtype, src, f.data(), cols);
      auto* o = static_cast<uint16_t*>(out);
      for (int64_t c = 0; c < cols; ++c)
        o[c] = act_ == Act::BF16 ? f32_to_bf16(f[size_t(c)]) : f32_to_f16(f[size_t(c)]);
    });
  }
  // Host rows converted by `convert(src row, dst row of out_rb bytes)` on a few threads, uploaded
  // in chunks so the host never holds a converted copy of the whole model.
  template <typename Convert>
  void upload_rows(const Tensor& host, uint8_t* dst, size_t out_rb, Convert&& convert) {
    const int64_t rows = host.rows();
    const int64_t chunk = std::max<int64_t>(1, int64_t(32u << 20) / int64_t(out_rb));
    std::vector<uint8_t> buf(size_t(std::min(chunk, rows)) * out_rb);
    const int nthreads = int(std::max(1u, std::min(8u, std::thread::hardware_concurrency())));
    for (int64_t r0 = 0; r0 < rows; r0 += chunk) {
      const int64_t n = std::min(chunk, rows - r0);
      std::vector<std::thread> pool;
      for (int ti = 0; ti < nthreads; ++ti)
        pool.emplace_back([&, ti] {
          for (int64_t r = ti; r < n; r += nthreads) convert(host.row(r0 + r), buf.data() + size_t(r) * out_rb);
        });
      for (auto& th : pool) th.join();
      copy_sync(dst + size_t(r0) * out_rb, buf.data(), size_t(n) * out_rb);
    }
  }

  static GqArgs gq_args(const Tensor& w) {
    const GqFormat f = *gq_format(w.dtype);
    return GqArgs{int(f.kind), f.group, w.row_nbytes()};
  }

  // Quantised weights: a GEMV that dequantises in registers for decode batches, a tensor-core
  // GEMM that does the same up to kGqMmaMaxTokens; above that (long prefills), tiles of rows
  // dequantised into an L2-sized scratch, each one cuBLASLt GEMM into its columns.
  void linear_gq(const Tensor& x, const ops::Linear& w, Tensor out, int T, int N, int K, bool f32) {
    const Tensor& wt = w.parts[0];
    const GqArgs q = gq_args(wt);
    // fp8 has no integer path: its fp32 GEMV is math-bound from 3 tokens, where tiles win.
    if (T <= kGqGemvMaxTokens && (q.kind != int(GqKind::Fp8) || T <= 2)) {
      const bool ready = xq_of_ == x.data && xq_rows_ == T && xq_cols_ == K;
      LL_CUDA(gemv_gq(act_, q, x.data, wt.data, w.bias.data, out.data, f32, T, N, K, N,
                      gq_fp32_ ? nullptr : gq_scratch_.data(), ready, stream_));
      return;
    }
    if (T >= fp8_gemm_min_ && q.kind == int(GqKind::Fp8) && linear_fp8(x, w, out, T, N, K, f32)) return;
    if (T <= (gq_mma_max_ >= 0 ? gq_mma_max_ : q.kind == int(GqKind::Int8) ? kGqMmaMaxTokensInt8 : kGqMmaMaxTokens)) {
      LL_CUDA(gemm_gq_mma(act_, q, x.data, wt.data, w.bias.data, out.data, f32, T, N, K, N, deq_.data(),
                          kDeqElems * 2, stream_));
      return;
    }
    const int tile = std::max(16, int(kDeqElems / size_t(K)) / 16 * 16);
    const size_t es = f32 ? 4 : 2;
    for (int n0 = 0; n0 < N; n0 += tile) {
      const int nc = std::min(tile, N - n0);
      LL_CUDA(dequant_gq(act_, q, wt.data, nullptr, n0, nc, K, deq_.data(), stream_));
      const void* bias = w.bias.data && !f32 ? static_cast<const uint8_t*>(w.bias.data) + size_t(n0) * 2 : nullptr;
      gemm_.run(act_, x.data, deq_.data(), bias, static_cast<uint8_t*>(out.data) + size_t(n0) * es, f32, T, nc,
                K, stream_, N);
    }
    if (f32 && w.bias.data)
      LL_CUDA(add_bias_f32(act_, static_cast<float*>(out.data), w.bias.data, T, N, stream_));
  }

  // The format --quantize int8/int4/fp8 gives a matrix with rows of K (embeddings stay int8 under
  // int4: the tied LM head is where 4 bits cost the most accuracy).
  std::optional<GqFormat> explicit_format(int64_t K, bool embedding) const {
    switch (qmode_) {
      case QuantMode::Int8: return GqFormat{GqKind::Int8, 0};
      case QuantMode::Fp8: return GqFormat{GqKind::Fp8, 0};
      case QuantMode::Int4:
        if (embedding) return GqFormat{GqKind::Int8, 0};
        for (int g : {128, 64, 32})
          if (K % g == 0) return GqFormat{GqKind::Int4, g};
        return std::nullopt;
      default: return std::nullopt;
    }
  }

  // Converts host parts (row blocks of one matrix) to what this backend computes with.
  Tensor prepare_matrix(const std::vector<Tensor>& parts, int64_t N, int64_t K, bool embedding,
                        std::vector<Buffer>& keep) {
    const bool prequantized = std::any_of(parts.begin(), parts.end(), [](const Tensor& p) { return is_gq(p.dtype); });
    LL_CHECK(!(prequantized && qmode_ != QuantMode::Auto && qmode_ != QuantMode::None),
             "--quantize {}: the checkpoint is already quantised ({}); leave --quantize out",
             quant_mode_name(qmode_), dtype_name(parts[0].dtype));
    if (auto f = explicit_format(K, embedding)) {
      // Upload as 16-bit, quantise on the device (fast, and no host copy of the model).
      Tensor t = upload_16bit(parts, N, K, keep);
      return quantize_on_device(t, *f, keep);
    }
    std::vector<DType> types;
    for (const Tensor& p : parts) types.push_back(p.dtype);
    if (qmode_ == QuantMode::Auto)
      if (auto f = gq_common_format(types); f && gq_row_ok(*f, K)) {
        Buffer b = alloc_gq(*f, N, K);
        size_t off = 0;
        for (const Tensor& p : parts) {
          const GqFormat target = *f;
          upload_rows(p, b.as<uint8_t>() + off, target.row_bytes(K),
                      [&](const void* src, void* dst) { to_gq_row(p.dtype, src, target, dst, K); });
          off += target.row_bytes(K) * size_t(p.rows());
        }
        return gq_matrix(std::move(b), *f, N, K, keep);
      }
    return upload_16bit(parts, N, K, keep);
  }
  // Every part converted to the activation type, fused into one [N, K] matrix.
  Tensor upload_16bit(const std::vector<Tensor>& parts, int64_t N, int64_t K, std::vector<Buffer>& keep) {
    Buffer b = alloc(size_t(N) * size_t(K) * 2);
    size_t off = 0;
    for (const Tensor& p : parts) {
      upload_rows(p, b.as<uint8_t>() + off);
      off += size_t(p.numel()) * 2;
    }
    Tensor t(b.data(), act_dtype(), {N, K}, Device::CUDA);
    keep.push_back(std::move(b));
    return t;
  }

  // 16-bit device matrix `t` (owned by the last buffer in keep, or by the caller) -> format f.
  Tensor quantize_on_device(const Tensor& t, GqFormat f, std::vector<Buffer>& keep) {
    const int64_t N = t.rows(), K = t.cols();
    LL_CHECK(gq_row_ok(f, K), "--quantize {}: rows of {} weights do not fit its groups", quant_mode_name(qmode_), K);
    Buffer b = alloc_gq(f, N, K);
    LL_CUDA(quantize_gq(act_, GqArgs{int(f.kind), f.group, f.row_bytes(K)}, t.data, b.data(), int(N), int(K), stream_));
    synchronize();
    if (!keep.empty() && keep.back().data() == t.data) keep.pop_back();  // the 16-bit copy
    return gq_matrix(std::move(b), f, N, K, keep);
  }

  // Per-channel fp8 matrices for the FP8 cuBLASLt GEMM carry their row scales as fp32 after the
  // rows (N floats), where linear_fp8 finds them.
  bool fp8_row_scales(GqFormat f, int64_t K) const {
    return fp8_gemm_ && props_.major * 10 + props_.minor >= 89 && f.kind == GqKind::Fp8 && f.group == 0 &&
           K % 16 == 0;
  }
  Buffer alloc_gq(GqFormat f, int64_t N, int64_t K) {
    return alloc(f.row_bytes(K) * size_t(N) + (fp8_row_scales(f, K) ? size_t(N) * sizeof(float) : 0));
  }
  // A GQ matrix in `b` (from alloc_gq), kept alive by `keep`.
  Tensor gq_matrix(Buffer b, GqFormat f, int64_t N, int64_t K, std::vector<Buffer>& keep) {
    ensure_deq_scratch();
    int_weights_ |= f.kind != GqKind::Fp8;
    Tensor q(b.data(), gq_dtype(f), {N, K}, Device::CUDA);
    if (fp8_row_scales(f, K)) {
      auto* scales = reinterpret_cast<float*>(b.as<uint8_t>() + f.row_bytes(K) * size_t(N));
      LL_CUDA(gq_row_scales(b.data(), f.row_bytes(K), f.code_bytes(K), int(N), scales, stream_));
    }
    keep.push_back(std::move(b));
    return q;
  }

  // FP8 W8A8: activations quantised per token into deq_ (codes, then scales), cuBLASLt FP8 GEMM
  // with per-row weight and per-token activation scales, chunks of tokens that fit deq_. False
  // where the weight has no fp8 row scales or cuBLASLt no algorithm (nothing written then).
  bool linear_fp8(const Tensor& x, const ops::Linear& w, Tensor out, int T, int N, int K, bool f32) {
    const Tensor& wt = w.parts[0];
    const GqFormat fmt = *gq_format(wt.dtype);
    if (!fp8_row_scales(fmt, K)) return false;
    const auto* w_scales = reinterpret_cast<const float*>(wt.ptr<uint8_t>() + size_t(N) * wt.row_nbytes());
    const size_t per_token = size_t(K) + sizeof(float);
    const int chunk = int(std::min<size_t>(size_t(T), kDeqElems * 2 / per_token));
    auto* codes = deq_.as<uint8_t>();
    auto* scales = reinterpret_cast<float*>(codes + size_t(chunk) * size_t(K));  // K % 16 == 0
    const void* bias = f32 ? nullptr : w.bias.data;
    const size_t es = f32 ? 4 : 2;
    for (int t0 = 0; t0 < T; t0 += chunk) {
      const int tc = std::min(chunk, T - t0);
      LL_CUDA(quantize_rows_fp8(act_, x.ptr<uint8_t>() + size_t(t0) * size_t(K) * 2, tc, K, codes, scales, stream_));
      if (!gemm_.run_fp8(act_, codes, scales, wt.data, int(wt.row_nbytes()), w_scales, bias,
                         out.ptr<uint8_t>() + size_t(t0) * size_t(N) * es, f32, tc, N, K, stream_)) {
        LL_CHECK(t0 == 0, "cuBLASLt FP8 GEMM: no algorithm for {} of {} tokens", tc, T);
        return false;
      }
    }
    if (f32 && w.bias.data) LL_CUDA(add_bias_f32(act_, out.ptr<float>(), w.bias.data, T, N, stream_));
    return true;
  }

  // Producers (norms, SwiGLU) also write their output's int8 form into gq_scratch_ when a
  // quantised decode GEMV will read it: returns the scratch to pass (or nullptr) and records
  // which tensor it describes; every other op that writes activations forgets it.
  void* quantize_x_for(const Tensor& out, bool shape_ok) {
    xq_of_ = nullptr;
    if (!gq_scratch_.data() || gq_fp32_ || !int_weights_ || !shape_ok) return nullptr;
    xq_of_ = out.data;
    xq_rows_ = int(out.rows()), xq_cols_ = int(out.cols());
    return gq_scratch_.data();
  }

  void ensure_deq_scratch() {
    if (!deq_.data()) deq_ = alloc(kDeqElems * 2);
    if (!gq_scratch_.data()) gq_scratch_ = alloc(kGqScratchBytes);
  }

  Act act_;
  QuantMode qmode_;
  Buffer deq_, gq_scratch_;
  const void* xq_of_ = nullptr;  // the activation whose int8 form gq_scratch_ holds
  int xq_rows_ = 0, xq_cols_ = 0;
  bool int_weights_ = false;     // some weights are int8 / int4 GQ (the integer decode path)
  // LITE_LLAMA_GQ_FP32=1: decode GEMVs keep 16-bit activations (fp32 math) instead of the int8 /
  // dp4a path, to measure what quantising activations costs in accuracy.
  const bool gq_fp32_ = env_is("LITE_LLAMA_GQ_FP32", "1");
  // LITE_LLAMA_GQ_MMA_MAX=n: the largest T for the tensor-core GEMM (0: tiles from 9 tokens;
  // default kGqMmaMaxTokens, kGqMmaMaxTokensInt8 for int8).
  const int gq_mma_max_ = env_int("LITE_LLAMA_GQ_MMA_MAX", -1);
  const bool check_finite_ = env_is("LITE_LLAMA_CHECK_FINITE", "1");
  // LITE_LLAMA_GEMV_MAX=n (0-8): the most tokens a 16-bit linear runs on the GEMV instead of
  // cuBLASLt. Default 1: at 2 tokens cuBLASLt is faster (H100, batch-2 decode step 2-13% shorter,
  // docs/benchmarks/gpu.md).
  const int gemv_max_tokens_ = std::clamp(env_int("LITE_LLAMA_GEMV_MAX", 1), 0, 8);
  // LITE_LLAMA_DECODE_SPLIT_KEYS=n: flash-decoding splits of >= n keys, in the grid (sized from
  // max_seq_len) and per sequence at run time, so short sequences use fewer splits. Default 16
  // (H100 A/B: batch-1 step 2.4-9% shorter on 1B/3B/4B, batch 8/64 within 2%; gpu.md). 0: the
  // old sizes (the grid assumes 64 keys a split, a sequence spreads its keys over all of them).
  const int split_keys_ = std::max(0, env_int("LITE_LLAMA_DECODE_SPLIT_KEYS", 16));
  // LITE_LLAMA_PDL_GEMV=1: the 16-bit one-token GEMV is launched with programmatic dependent
  // launch and fetches its first weights while the norm / SwiGLU / attention merge before it
  // finishes (as the quantised GEMVs do by default). Off until measured.
  const bool pdl_gemv_ = env_is("LITE_LLAMA_PDL_GEMV", "1");
  int64_t checked_ops_ = 0;
  int device_ = 0;
  cudaDeviceProp props_{};
  // FP8 W8A8 through cuBLASLt (compute capability 8.9+) for per-channel fp8 weights from
  // LITE_LLAMA_FP8_GEMM_MIN tokens (default kFp8GemmMinTokens); LITE_LLAMA_FP8_GEMM=0 keeps them on
  // the W8A16 tensor-core GEMM.
  const bool fp8_gemm_ = !env_is("LITE_LLAMA_FP8_GEMM", "0");
  const int fp8_gemm_min_ = env_int("LITE_LLAMA_FP8_GEMM_MIN", kFp8GemmMinTokens);
  cudaStream_t stream_ = nullptr;
  Gemm gemm_;
  std::vector<cudaGraphExec_t> graphs_;
  OpProfiler prof_;
  Buffer sample_args_, pen_buf_;
  int sample_rows_cap_ = 0, pen_cap_ = 0;
};

}  // namespace

int device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return n;
}

std::unique_ptr<ops::Backend> make_cuda_backend(const std::string& dtype, const std::string& quantize) {
  return std::make_unique<CudaBackend>(dtype, quantize);
}

}  // namespace lite_llama::cuda

// The CUDA backend's op dispatch: each ops::Backend call becomes one or two kernel launches on the
// device's stream. Weight preparation (weight_prep), the linear-kernel choice (linear), sampling
// (device_sampler), graphs and the NaN check live in pieces of their own beside this file.
#include "backends/cuda/cuda_backend.h"

#include <algorithm>
#include <cstdlib>
#include <string>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device.h"
#include "backends/cuda/device_sampler.h"
#include "backends/cuda/finite_check.h"
#include "backends/cuda/graphs.h"
#include "backends/cuda/launchers.h"
#include "backends/cuda/linear.h"
#include "backends/cuda/moe_experts.h"
#include "backends/cuda/nccl_comm.h"
#include "backends/cuda/peer_allreduce.h"
#include "backends/cuda/profiler.h"
#include "backends/cuda/weight_prep.h"
#include "core/gq.h"

namespace lite_llama::cuda {
namespace {

GqArgs table_gq_args(const Tensor& w) {
  const GqFormat f = *gq_format(w.dtype);
  return GqArgs{int(f.kind), f.group, w.row_nbytes()};
}

class CudaBackend final : public ops::Backend {
 public:
  explicit CudaBackend(const BackendOptions& o, std::shared_ptr<NcclComm> comm = nullptr,
                       std::shared_ptr<PeerAllReduce> peer = nullptr)
      : comm_(std::move(comm)),
        peer_(std::move(peer)),
        tuning_(o.cuda),
        dev_(o.dtype == ActType::FP16 ? Act::F16 : Act::BF16),
        linear_(dev_, o.cuda, comm_ && comm_->size() > 1),
        weights_(dev_, linear_, o.quantize),
        sampler_(dev_),
        graphs_(dev_.stream()),
        finite_(dev_, o.cuda.check_finite) {}
#ifdef LITE_LLAMA_DECODE_TIMELINE
  ~CudaBackend() override {  // diagnostic build: the decode attention timeline of this run
    const std::string& path = tuning_.decode_timeline_out;
    if (FILE* f = path.empty() ? nullptr : std::fopen(path.c_str(), "w")) {
      decode_timeline_dump(f, "timeline engine");
      std::fclose(f);
    }
  }
#endif

  Device device() const override { return Device::CUDA; }
  DType act_dtype() const override { return dev_.act_dtype(); }
  DType residual_dtype() const override { return tuning_.fp32_residual ? DType::F32 : dev_.act_dtype(); }
  void probe_activation_range(bool on) override { finite_.probe(on); }
  double probed_activation_range() const override { return finite_.max_abs(); }
  std::string name() const override {
    const cudaDeviceProp& p = dev_.props();
    return fmt::format("cuda:{} ({}, sm_{}{}, {} SMs, {:.0f} GiB, {})", dev_.index(), p.name, p.major, p.minor,
                       p.multiProcessorCount, double(p.totalGlobalMem) / (1 << 30),
                       act() == Act::BF16 ? "bf16" : "fp16");
  }

  Buffer alloc(size_t bytes) override { return dev_.alloc(bytes); }
  void copy_to_device(void* dst, const void* src, size_t n) override {
    LL_CUDA(cudaMemcpyAsync(dst, src, n, cudaMemcpyHostToDevice, stream()));
  }
  void copy_to_host(void* dst, const void* src, size_t n) override { dev_.copy_to_host(dst, src, n); }
  void synchronize() override { dev_.synchronize(); }
  void memory_info(size_t* free, size_t* total) const override { LL_CUDA(cudaMemGetInfo(free, total)); }

  Tensor upload(const Tensor& host, std::vector<Buffer>& keep) override {
    Buffer b = alloc(host.nbytes());
    dev_.copy_sync(b.data(), host.data, host.nbytes());
    Tensor t = host;
    t.data = b.data();
    t.device = Device::CUDA;
    keep.push_back(std::move(b));
    return t;
  }
  Tensor prepare_weight(const Tensor& host, std::vector<Buffer>& keep) override {
    return weights_.matrix({host}, host.rows(), host.cols(), true, keep);
  }
  ops::Linear prepare_linear(const ops::Linear& host, std::vector<Buffer>& keep) override {
    // One fused [N, K] matrix (q|k|v, gate|up): a single GEMM per projection.
    ops::Linear l;
    l.in_features = host.in_features;
    l.out_features = host.out_features;
    l.parts = {weights_.matrix(host.parts, host.out_features, host.in_features, false, keep)};
    if (host.bias.data) l.bias = weights_.bias(host.bias, keep);
    return l;
  }
  Tensor prepare_bias(const Tensor& bias, std::vector<Buffer>& keep) override { return weights_.bias(bias, keep); }
  Tensor random_weight(int64_t rows, int64_t cols, uint64_t seed, float scale, std::vector<Buffer>& keep,
                       bool embedding) override {
    return weights_.random(rows, cols, seed, scale, embedding, keep);
  }

  // Mixture of experts (moe_experts.h, kernels/moe.cu): stacked 16-bit experts, the router's
  // top-k and the grouped GEMV on the device, no host synchronisation.
  ops::MoeExperts prepare_experts(const ops::MoeExperts& host, uint64_t seed, std::vector<Buffer>& keep) override {
    return stack_experts(dev_, weights_, host, seed, keep);
  }
  void moe_route(const Tensor& logits, int top_k, bool norm_topk_prob, int32_t* t_expert, float* t_weight) override {
    linear_.forget_xq();
    ProfileScope ps(prof_, "moe route", stream());
    LL_CUDA(cuda::moe_route(act(), logits.data, int(logits.rows()), int(logits.cols()), top_k, norm_topk_prob,
                            t_expert, t_weight, stream(), pdl(tuning_.pdl_moe)));
  }
  size_t moe_workspace_bytes(int max_tokens, int top_k, const ops::MoeExperts& w) const override {
    return experts_workspace_bytes(max_tokens, top_k, w);
  }
  void moe_experts(const Tensor& x, const ops::MoeExperts& w, const int32_t* t_expert, const float* t_weight,
                   int top_k, void* workspace, Tensor out) override {
    linear_.forget_xq();
    {
      ProfileScope ps(prof_, "moe experts", stream());
      run_experts(dev_, x, w, t_expert, t_weight, top_k, workspace, out, tuning_, pdl(tuning_.pdl_moe));
    }
    finite_("moe_experts", out);
  }

  void embedding(const Tensor& table, const int32_t* ids, int n, Tensor out) override {
    linear_.forget_xq();
    ProfileScope ps(prof_, "embedding", stream());
    const bool f32 = out.dtype == DType::F32;
    if (is_gq(table.dtype))
      LL_CUDA(dequant_gq(act(), table_gq_args(table), table.data, ids, 0, n, int(table.cols()), out.data, stream(),
                         f32));
    else
      LL_CUDA(cuda::embedding(table.dtype == DType::BF16 ? Act::BF16 : Act::F16, table.data, ids, out.data, n,
                              int(table.cols()), f32, stream()));
    finite_("embedding", out);
  }
  void zero(Tensor x) override { LL_CUDA(cudaMemsetAsync(x.data, 0, x.nbytes(), stream())); }
  void rms_norm(const Tensor& x, const Tensor& w, float eps, Tensor out) override {
    ProfileScope ps(prof_, "norm", stream());
    const GqX xq = linear_.quantize_x_for(out, norm_quantizes_x(int(x.rows()), int(x.cols())));
    LL_CUDA(cuda::rms_norm(act(), x.dtype == DType::F32, x.data, w.ptr<float>(), eps, out.data, int(x.rows()),
                           int(x.cols()), stream(), xq, pdl(tuning_.pdl_norm)));
    finite_("rms_norm", out);
  }
  void add_rms_norm(Tensor residual, const Tensor& x, const Tensor& w, float eps, Tensor out) override {
    ProfileScope ps(prof_, "norm", stream());
    const GqX xq = linear_.quantize_x_for(out, norm_quantizes_x(int(x.rows()), int(x.cols())));
    LL_CUDA(cuda::add_rms_norm(act(), residual.dtype == DType::F32, x.dtype == DType::F32, residual.data, x.data,
                               w.ptr<float>(), eps, out.data, int(x.rows()), int(x.cols()), stream(), xq,
                               pdl(tuning_.pdl_norm)));
    finite_("add_rms_norm (residual)", residual);
    finite_("add_rms_norm", out);
  }
  void linear(const Tensor& x, const ops::Linear& w, Tensor out) override {
    {
      ProfileScope ps(prof_, "gemm", stream());
      linear_.run(x, w, out);
    }
    finite_("linear", out);
  }
  void qkv_rope_store(const Tensor& qkv, const Tensor* q_norm, const Tensor* k_norm, float eps,
                      const int32_t* t_positions, const int32_t* t_slots, const ops::RopeTable& rope,
                      int num_heads, int num_kv_heads, int head_dim, ops::KvLayer kv,
                      Tensor q_out) override {
    linear_.forget_xq();
    ProfileScope ps(prof_, "rope+kv write", stream());
    const RopeKvArgs a = rope_kv_args(qkv.data, int(qkv.rows()), q_norm, k_norm, eps, t_positions, t_slots, rope,
                                      num_heads, num_kv_heads, head_dim, kv, q_out);
    LL_CUDA(cuda::qkv_rope_store(act(), a, stream(), pdl(tuning_.pdl_norm)));
    finite_("qkv_rope_store (q)", q_out);
  }
  bool linear_rope_store(const Tensor& x, const ops::Linear& qkv, const int32_t* t_positions,
                         const int32_t* t_slots, const ops::RopeTable& rope, int num_heads, int num_kv_heads,
                         int head_dim, ops::KvLayer kv, Tensor q_out) override {
    const RopeKvArgs a = rope_kv_args(nullptr, int(x.rows()), nullptr, nullptr, 0.f, t_positions, t_slots, rope,
                                      num_heads, num_kv_heads, head_dim, kv, q_out);
    if (!linear_.rope_store_fits(x, qkv, a)) return false;
    {
      ProfileScope ps(prof_, "gemm", stream());
      linear_.run_rope_store(x, qkv, a);
    }
    finite_("linear (rope + kv write epilogue, q)", q_out);
    return true;
  }
  void write_slot_table(int32_t* req_to_slot, int stride, const int32_t* t_req_idx,
                        const int32_t* t_positions, const int32_t* t_slots, int n) override {
    linear_.forget_xq();
    ProfileScope ps(prof_, "copies", stream());
    LL_CUDA(cuda::write_slot_table(req_to_slot, stride, t_req_idx, t_positions, t_slots, n, stream()));
  }
  size_t attention_workspace_bytes(int max_seqs, int num_heads, int head_dim) const override {
    return decode_workspace_bytes(max_seqs, num_heads, head_dim, dev_.sm_count());
  }
  void attention(const Tensor& q, const ops::KvLayer& kv, const ops::AttnMeta& m, int num_heads,
                 int num_kv_heads, int head_dim, float scale, Tensor out) override {
    linear_.forget_xq();
    AttnArgs a{q.data, kv.k.data, kv.v.data, out.data, m.b_q_start, m.b_q_len, m.b_seq_len, m.b_req_idx,
               m.req_to_slot, m.req_stride, 0, 0, m.max_seq_len, num_heads, num_kv_heads, head_dim, scale,
               tuning_.decode_kv_runs ? m.b_kv_runs : nullptr};
    const int nd = m.num_decode_seqs;
    if (nd > 0) {
      ProfileScope ps(prof_, "attention decode", stream());
      a.num_seqs = nd;
      a.max_q_len = 1;
      const int stages = decode_stages(nd, num_kv_heads, head_dim, dev_.sm_count(), tuning_.decode_stages);
      const int splits = decode_splits(nd, num_kv_heads, head_dim, m.max_seq_len, dev_.sm_count(), split_keys(), stages);
      LL_CUDA(attention_decode(act(), a, splits, split_keys(), static_cast<float*>(m.workspace), stream(),
                               pdl(tuning_.pdl_attention), stages, tuning_.decode_max_carveout));
    }
    if (m.num_seqs > nd) {
      a.b_q_start = m.b_q_start + nd;
      a.b_q_len = m.b_q_len + nd;
      a.b_seq_len = m.b_seq_len + nd;
      a.b_req_idx = m.b_req_idx + nd;
      if (a.b_kv_runs) a.b_kv_runs += 2 * nd;
      a.num_seqs = m.num_seqs - nd;
      a.max_q_len = m.max_q_len;
      if (m.max_prefill_seq_len > 0) a.max_seq_len = std::min(a.max_seq_len, m.max_prefill_seq_len);
      ProfileScope ps(prof_, "attention prefill", stream());
      // The decode's merge above has read the workspace before this (same stream).
      const int splits = prefill_splits(a, m.num_tokens, dev_.sm_count(), workspace_rows_per_head(head_dim, dev_.sm_count()),
                                        prefill_wgmma(), tuning_.prefill_wgmma_split);
      LL_CUDA(attention_prefill(act(), a, splits, static_cast<float*>(m.workspace), stream(), prefill_wgmma(),
                                tuning_.prefill_wg3_waves, dev_.sm_count(), tuning_.prefill_wgmma_split));
    }
    finite_(nd == m.num_seqs ? "attention (decode)" : "attention (prefill)", out);
  }
  bool linear_swiglu(const Tensor& x, const ops::Linear& gate_up, Tensor out) override {
    if (!linear_.gate_up_swiglu_fits(x, gate_up, out)) return false;
    {
      ProfileScope ps(prof_, "gemm", stream());
      linear_.run_gate_up_swiglu(x, gate_up, out);
    }
    finite_("linear (swiglu epilogue)", out);
    return true;
  }
  void swiglu_linear(const Tensor& gate_up, const ops::Linear& w, Tensor mlp, Tensor out) override {
    if (!linear_.swiglu_fits(gate_up, w)) return ops::Backend::swiglu_linear(gate_up, w, mlp, out);
    {
      ProfileScope ps(prof_, "gemm", stream());
      linear_.run_swiglu(gate_up, w, out);
    }
    finite_("linear (swiglu fused)", out);
  }
  void swiglu(const Tensor& gate_up, Tensor out) override {
    ProfileScope ps(prof_, "activation", stream());
    const GqX xq = linear_.quantize_x_for(out, swiglu_quantizes_x(int(out.rows()), int(out.cols())));
    LL_CUDA(cuda::swiglu(act(), gate_up.data, out.data, int(out.rows()), int(out.cols()), stream(), xq));
    finite_("swiglu", out);
  }
  void gather_rows(const Tensor& x, const int32_t* rows, int n, Tensor out) override {
    linear_.forget_xq();
    ProfileScope ps(prof_, "copies", stream());
    LL_CUDA(cuda::gather_rows(x.data, rows, out.data, n, x.row_nbytes(), stream()));
  }
  void argmax(const Tensor& logits, int rows, int limit, int32_t* out) override {
    ProfileScope ps(prof_, "sampling", stream());
    LL_CUDA(argmax_rows(logits.ptr<float>(), rows, int(logits.cols()), limit, out, stream()));
  }

  void set_profiling(bool on) override { prof_.enable(on); }
  std::vector<ProfileEntry> profile_report() override { return prof_.report(); }

  bool supports_device_sampling() const override { return true; }
  void reserve_sampling(int max_rows, int max_penalties) override { sampler_.reserve(max_rows, max_penalties); }
  bool sample(const Tensor& logits, int rows, int limit, const std::vector<ops::SampleRow>& params,
              const std::vector<int32_t>& pen_tokens, const std::vector<int32_t>& pen_counts,
              int32_t* out) override {
    ProfileScope ps(prof_, "sampling", stream());
    return sampler_.sample(logits, rows, limit, params, pen_tokens, pen_counts, out);
  }

  bool score_rows(const Tensor& logits, int rows, int limit, const int32_t* targets, int top_k, ops::RowScore* out,
                  ops::TopToken* top) override {
    ProfileScope ps(prof_, "sampling", stream());
    return sampler_.score(logits, rows, limit, targets, top_k, out, top);
  }

  void reserve_kept_rows(int rows, int64_t vocab) override { sampler_.reserve_kept(rows, vocab); }
  bool keep_rows(const Tensor& logits, const int32_t* rows, int n, Tensor* kept) override {
    ProfileScope ps(prof_, "sampling", stream());
    return sampler_.keep(logits, rows, n, kept);
  }

  void reserve_constraints(int max_rows, int words, int max_bias) override {
    sampler_.reserve_constraints(max_rows, words, max_bias);
  }
  bool constrain_logits(const Tensor& logits, int rows, const uint32_t* masks, int words,
                        const std::vector<ops::LogitBias>& bias) override {
    ProfileScope ps(prof_, "sampling", stream());
    return sampler_.constrain(logits, rows, masks, words, bias);
  }

  int tp_rank() const override { return comm_ ? comm_->rank() : 0; }
  int tp_size() const override { return comm_ ? comm_->size() : 1; }
  void bind_thread() override { LL_CUDA(cudaSetDevice(dev_.index())); }
  void all_reduce(Tensor x) override {
    if (!comm_) return;
    linear_.forget_xq();
    ProfileScope ps(prof_, "all-reduce", stream());
    const size_t bytes = size_t(x.numel()) * dtype_info(x.dtype).block_bytes;
    if (peer_ && peer_->takes(bytes, x.dtype))
      peer_->run(x.data, bytes, x.dtype, stream());
    else
      comm_->all_reduce(x.data, size_t(x.numel()), x.dtype, stream());
  }
  void all_reduce_add_rms_norm(Tensor residual, Tensor x, const Tensor& w, float eps, Tensor out) override {
    const int rows = int(x.rows()), n = int(x.cols());
    if (!peer_ || residual.dtype != DType::F32 || x.dtype != DType::F32 || !peer_->takes_norm(rows, n) ||
        linear_.quantize_x_for(out, norm_quantizes_x(rows, n)).scratch != nullptr) {
      ops::Backend::all_reduce_add_rms_norm(residual, x, w, eps, out);
      return;
    }
    {
      ProfileScope ps(prof_, "all-reduce+norm", stream());
      peer_->run_add_rms_norm(x.data, rows, n, residual.ptr<float>(), w.ptr<float>(), eps, act(), out.data, stream(),
                              pdl(tuning_.pdl_all_reduce), tuning_.peer_ll_batch_poll);
    }
    finite_("add_rms_norm (residual)", residual);
    finite_("add_rms_norm", out);
  }
  size_t all_gather_workspace_bytes(const Tensor& local) const override {
    return comm_ ? size_t(local.numel()) * sizeof(float) * size_t(comm_->size()) : 0;
  }
  void all_gather_cols(const Tensor& local, int64_t cols, Tensor out, void* ws) override {
    if (!comm_) return;
    ProfileScope ps(prof_, "all-gather", stream());
    const size_t n = size_t(local.numel());
    comm_->all_gather(local.data, ws, n, stream());
    // Rank-major [size][rows][ld] -> each rank's columns of the whole rows.
    const size_t ld = size_t(local.cols()) * sizeof(float), pitch = size_t(out.cols()) * sizeof(float);
    for (int r = 0; r < comm_->size(); ++r) {
      const int64_t c0 = int64_t(r) * cols, w = std::min(cols, out.cols() - c0);
      if (w <= 0 || out.rows() == 0) continue;
      LL_CUDA(cudaMemcpy2DAsync(out.ptr<float>() + c0, pitch, static_cast<float*>(ws) + size_t(r) * n, ld,
                                size_t(w) * sizeof(float), size_t(out.rows()), cudaMemcpyDeviceToDevice, stream()));
    }
  }

  std::pair<int, int> tune_linears(const std::vector<const ops::Linear*>& same, DType out_dtype,
                                   const std::vector<int>& token_counts) override {
    return linear_.tune(same, out_dtype, token_counts);
  }
  bool supports_graphs() const override { return true; }
  int capture_graph(const std::function<void()>& fn) override { return graphs_.capture(fn); }
  void replay_graph(int id) override { graphs_.replay(id); }

 private:
  Act act() const { return dev_.act(); }
  cudaStream_t stream() const { return dev_.stream(); }
  int split_keys() const { return std::max(0, tuning_.decode_split_keys); }
  // Programmatic dependent launch for one kernel family: its switch, the global one, sm_90+.
  bool pdl(bool family) const { return tuning_.pdl && family && dev_.props().major >= 9; }
  bool prefill_wgmma() const {
    return tuning_.prefill_wgmma && dev_.props().major == 9 && dev_.props().minor == 0;
  }
  // The RoPE + KV write's arguments (qkv: the projection's products, or null where the QKV GEMV
  // writes them itself).
  static RopeKvArgs rope_kv_args(const void* qkv, int T, const Tensor* q_norm, const Tensor* k_norm, float eps,
                                 const int32_t* t_positions, const int32_t* t_slots, const ops::RopeTable& rope,
                                 int num_heads, int num_kv_heads, int head_dim, const ops::KvLayer& kv,
                                 const Tensor& q_out) {
    return RopeKvArgs{qkv, q_out.data, kv.k.data, kv.v.data,
                      q_norm ? q_norm->ptr<float>() : nullptr, k_norm ? k_norm->ptr<float>() : nullptr, eps,
                      t_positions, t_slots, rope.cos_sin.ptr<float>(), rope.rot_dim,
                      rope.layout == ops::RopeLayout::Interleaved, T, num_heads, num_kv_heads, head_dim};
  }

  std::shared_ptr<NcclComm> comm_;  // tensor parallelism (null: one device)
  std::shared_ptr<PeerAllReduce> peer_;  // small all-reduces over peer memory (null: NCCL only)
  const CudaTuning tuning_;
  CudaDevice dev_;
  CudaLinear linear_;
  WeightPrep weights_;
  DeviceSampler sampler_;
  GraphSet graphs_;
  FiniteCheck finite_;
  OpProfiler prof_;
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

std::unique_ptr<ops::Backend> make_cuda_backend(const BackendOptions& opts) {
  return std::make_unique<CudaBackend>(opts);
}

std::vector<std::unique_ptr<ops::Backend>> make_cuda_tp_backends(const BackendOptions& opts, int tp) {
  std::vector<std::shared_ptr<NcclComm>> comms = NcclComm::create_all(tp);
  std::vector<std::shared_ptr<PeerAllReduce>> peers =
      PeerAllReduce::create_all(tp, size_t(std::max(0, opts.cuda.peer_all_reduce_max_kib)) * 1024);
  int prev = 0;
  LL_CUDA(cudaGetDevice(&prev));
  std::vector<std::unique_ptr<ops::Backend>> out;
  for (int r = 0; r < tp; ++r) {
    LL_CUDA(cudaSetDevice(r));  // the backend's stream and handles belong to device r
    out.push_back(std::make_unique<CudaBackend>(opts, comms[size_t(r)], peers.empty() ? nullptr : peers[size_t(r)]));
  }
  LL_CUDA(cudaSetDevice(prev));
  return out;
}

}  // namespace lite_llama::cuda

// Backend-neutral op signatures. A Backend implements every op for one device; the decoder is
// written once against this table. Tensors and metadata pointers live on the backend's device.
// Activations are F32 on the CPU and BF16/F16 on CUDA (act_dtype()); accumulation is always F32.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "core/tensor.h"
#include "ops/sample_row.h"

namespace lite_llama::ops {

// A projection out[T, N] = x[T, K] @ W^T (+ bias). W may be stored as several row blocks
// (e.g. GGUF's separate q/k/v or gate/up tensors) that together give N output columns: the CPU
// uses the file's tensors in place, CUDA fuses them into one matrix at load.
struct Linear {
  std::vector<Tensor> parts;  // each [n_i, K], any weight dtype the backend supports
  Tensor bias;                // [N] or data == nullptr
  int64_t in_features = 0;
  int64_t out_features = 0;
};

enum class RopeLayout : uint8_t {
  Interleaved,  // pairs (2i, 2i+1): GGUF llama files (weights permuted by the converter)
  Neox,         // pairs (i, i + d/2): HF checkpoints, GGUF qwen2/qwen3
};

// Precomputed rotary table: row p holds cos[rot/2] then sin[rot/2] for position p (F32).
struct RopeTable {
  Tensor cos_sin;  // [max_pos, rot_dim]
  int rot_dim = 0;
  RopeLayout layout = RopeLayout::Neox;
};

// One layer of the token-level KV pool: row `slot` holds that token's K (or V) for all KV heads.
struct KvLayer {
  Tensor k;  // [num_slots, kv_heads, head_dim]
  Tensor v;
};

// The experts of one mixture-of-experts layer, each a SwiGLU MLP: down(silu(gate x) * up x).
// As loaded they are per-expert views (HF: one tensor per expert and projection; GGUF: slices of
// the stacked [E, F, H] tensors, in the file's type). prepare_experts() returns the form the
// backend computes with: the CPU keeps the views; a backend with grouped GEMMs may instead stack
// them into one [E, 2F, H] and one [E, H, F] tensor (`stacked_*`) and leave the lists empty.
struct MoeExperts {
  std::vector<Tensor> gate, up;  // per expert [F, H]
  std::vector<Tensor> down;      // per expert [H, F]
  Tensor stacked_gate_up;        // [E, 2F, H] (gate rows then up rows), where the backend stacks
  Tensor stacked_down;           // [E, H, F]
  int num_experts = 0;
  int64_t hidden = 0;            // H
  int64_t ffn = 0;               // F, the expert's intermediate size
};

// Packed batch of sequences ("nopad"): sequence b owns tokens [b_q_start[b], +b_q_len[b]) of
// this step; its KV length after the step is b_seq_len[b]; its slots are row b_req_idx[b] of
// req_to_slot. Decode sequences (q_len == 1) come first.
struct AttnMeta {
  int num_seqs = 0;
  int num_tokens = 0;
  int num_decode_seqs = 0;
  int max_q_len = 0;    // host-side bounds, for launch shapes
  int max_seq_len = 0;
  // The prefill sequences' longest length this step (0: max_seq_len): how many keys a short
  // chunk's split attention may spread over blocks.
  int max_prefill_seq_len = 0;
  const int32_t* b_q_start = nullptr;  // [B]
  const int32_t* b_q_len = nullptr;    // [B]
  const int32_t* b_seq_len = nullptr;  // [B]
  const int32_t* b_req_idx = nullptr;  // [B]
  const int32_t* req_to_slot = nullptr;  // [max_reqs, req_stride]
  int req_stride = 0;
  // [B][2] or null: (s, n) where the sequence's keys i < n are at slots s + i (req_to_slot says
  // the same); n 0 where it has no such run. A backend may use it to skip the table for them.
  const int32_t* b_kv_runs = nullptr;
  void* workspace = nullptr;  // attention_workspace_bytes() of scratch
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual Device device() const = 0;
  virtual DType act_dtype() const = 0;
  // The residual stream (embedding output, add_rms_norm's residual): fp32 where the backend keeps
  // it so, as the fp32 reference does; the projections' inputs and outputs stay act_dtype().
  virtual DType residual_dtype() const { return act_dtype(); }
  // Storage type of the KV cache (the CPU backend may keep F16 to halve long contexts' traffic).
  virtual DType kv_dtype() const { return act_dtype(); }
  virtual std::string name() const = 0;

  // Memory. Allocations happen at start-up only, never inside a step.
  virtual Buffer alloc(size_t bytes) = 0;
  virtual void copy_to_device(void* dst, const void* src, size_t bytes) = 0;
  virtual void copy_to_host(void* dst, const void* src, size_t bytes) = 0;
  virtual void synchronize() = 0;
  // A weight as this backend computes with it: the CPU keeps the file's bytes in place (mmap);
  // CUDA converts to act_dtype (or a supported quantised layout) and uploads. `keep` owns copies.
  virtual Tensor prepare_weight(const Tensor& host, std::vector<Buffer>& keep) = 0;
  // Copies a tensor as it is (same dtype) to the device; the CPU returns `host` itself.
  virtual Tensor upload(const Tensor& host, std::vector<Buffer>& keep) = 0;
  // A [rows, cols] weight of uniform values in [-scale, scale] from `seed` (dummy weights for
  // benchmarks: no file, any model size). Stored in act_dtype (BF16 on the CPU), or quantised
  // the way --quantize would store a loaded one (`embedding`: the token table).
  virtual Tensor random_weight(int64_t rows, int64_t cols, uint64_t seed, float scale,
                               std::vector<Buffer>& keep, bool embedding = false) = 0;
  // Fuses row blocks into one weight where the backend benefits (CUDA); identity on the CPU.
  virtual Linear prepare_linear(const Linear& host, std::vector<Buffer>& keep) = 0;
  // A linear's bias (F32, already uploaded) as linear() reads it: the CPU keeps F32, CUDA converts
  // to act_dtype. prepare_linear does this itself; dummy weights, built on the device, call it.
  virtual Tensor prepare_bias(const Tensor& bias, std::vector<Buffer>& keep) { return bias; }

  // out[n, :] = table[ids[n], :]  (table in any weight dtype, out in act dtype)
  virtual void embedding(const Tensor& table, const int32_t* ids, int n, Tensor out) = 0;
  // x = 0 (every byte), in stream order.
  virtual void zero(Tensor x) = 0;
  // out = x / rms(x) * w, per row
  virtual void rms_norm(const Tensor& x, const Tensor& w, float eps, Tensor out) = 0;
  // residual += x; out = rms_norm(residual) * w   (the seed's fused skip_rmsnorm)
  virtual void add_rms_norm(Tensor residual, const Tensor& x, const Tensor& w, float eps,
                            Tensor out) = 0;
  virtual void linear(const Tensor& x, const Linear& w, Tensor out) = 0;
  // qkv[T, (Hq + 2*Hkv) * D] -> q_out[T, Hq*D] rotated; K rotated and V written into the pool
  // rows t_slots[T]. With q_norm/k_norm (Qwen3, [D] F32) each head is RMS-normalised first.
  virtual void qkv_rope_store(const Tensor& qkv, const Tensor* q_norm, const Tensor* k_norm,
                              float eps, const int32_t* t_positions, const int32_t* t_slots,
                              const RopeTable& rope, int num_heads, int num_kv_heads,
                              int head_dim, KvLayer kv, Tensor q_out) = 0;
  // qkv_rope_store(linear(x, qkv), nullptr, nullptr, ...) in one kernel, where the backend has one
  // for this step (the CUDA backend's one-token GEMV of 16-bit weights, full rotary); false: it
  // ran nothing, and the caller runs linear, then qkv_rope_store. No q/k norm takes this path.
  virtual bool linear_rope_store(const Tensor& x, const Linear& qkv, const int32_t* t_positions,
                                 const int32_t* t_slots, const RopeTable& rope, int num_heads,
                                 int num_kv_heads, int head_dim, KvLayer kv, Tensor q_out) {
    return false;
  }
  // req_to_slot[t_req_idx[t] * stride + t_positions[t]] = t_slots[t] for t < n.
  virtual void write_slot_table(int32_t* req_to_slot, int stride, const int32_t* t_req_idx,
                                const int32_t* t_positions, const int32_t* t_slots, int n) = 0;
  // Causal attention of the packed queries over each sequence's slots; GQA by index mapping.
  virtual void attention(const Tensor& q, const KvLayer& kv, const AttnMeta& meta, int num_heads,
                         int num_kv_heads, int head_dim, float scale, Tensor out) = 0;
  // Mixture of experts. Weights as prepare_weight does for a matrix. Dummy experts (data ==
  // nullptr in `host`) are drawn on the device, the same values on every backend: projection p
  // (gate 0, up 1, down 2) as one [E * rows, cols] random_weight of seed `seed + p` and scale
  // 1/sqrt(cols), expert e its rows [e * rows, (e + 1) * rows).
  virtual MoeExperts prepare_experts(const MoeExperts& host, uint64_t seed, std::vector<Buffer>& keep) = 0;
  // Router: per token t, softmax (fp32) of router_logits[t, :E] (act dtype), the top_k
  // probabilities in descending order (lowest expert index on ties) into t_expert[t * top_k + j]
  // and t_weight[t * top_k + j], divided by their sum when norm_topk_prob (Qwen3-MoE's
  // norm_topk_prob). Outputs are device memory of this backend.
  virtual void moe_route(const Tensor& router_logits, int top_k, bool norm_topk_prob,
                         int32_t* t_expert, float* t_weight) = 0;
  // out[t] = sum_j t_weight[t, j] * expert_{t_expert[t, j]}(x[t])  (x, out: [T, H] act dtype),
  // summed over j in ascending expert order (as transformers does). `workspace` holds
  // moe_workspace_bytes(T, top_k, w) bytes.
  virtual size_t moe_workspace_bytes(int max_tokens, int top_k, const MoeExperts& w) const = 0;
  virtual void moe_experts(const Tensor& x, const MoeExperts& w, const int32_t* t_expert,
                           const float* t_weight, int top_k, void* workspace, Tensor out) = 0;
  // gate_up[T, 2F] = [gate | up] -> out[T, F] = silu(gate) * up
  virtual void swiglu(const Tensor& gate_up, Tensor out) = 0;
  // out[T, F] = silu(gate) * up of linear(x, gate_up) (gate_up: F gate rows, then F up rows) in one
  // kernel, where the backend has one for this step (the CUDA backend's one-token GEMV of 16-bit
  // weights); false: it ran nothing, and the caller runs linear, then swiglu.
  virtual bool linear_swiglu(const Tensor& x, const Linear& gate_up, Tensor out) { return false; }
  // out = linear(swiglu(gate_up), w); `mlp` [T, F] is scratch the backend may use for the
  // intermediate (the CUDA backend's one-token GEMV computes it on the fly instead).
  virtual void swiglu_linear(const Tensor& gate_up, const Linear& w, Tensor mlp, Tensor out) {
    swiglu(gate_up, mlp);
    linear(mlp, w, out);
  }
  // out[i, :] = x[rows[i], :]
  virtual void gather_rows(const Tensor& x, const int32_t* rows, int n, Tensor out) = 0;
  // out[r] = argmax of logits row r over columns [0, limit) (lowest index on ties); `out` is
  // device memory of this backend.
  virtual void argmax(const Tensor& logits, int rows, int limit, int32_t* out) = 0;
  // Device-side sampling (penalties, temperature, top-k, top-p, min-p, seeded draw) of `rows`
  // logits rows (modified in place) into `out` (device memory). Host arrays are uploaded into
  // buffers reserved by reserve_sampling(); false where unsupported or over capacity.
  virtual bool supports_device_sampling() const { return false; }
  virtual void reserve_sampling(int max_rows, int max_penalties) {}
  virtual bool sample(const Tensor& logits, int rows, int limit, const std::vector<SampleRow>& params,
                      const std::vector<int32_t>& pen_tokens, const std::vector<int32_t>& pen_counts,
                      int32_t* out) {
    return false;
  }
  // Scoring and logprobs: per row r of `logits` over columns [0, limit), out[r] for the target
  // token targets[r] and top[r * top_k ...] the row's top_k columns by value (lower index first on
  // ties), as sampling::log_softmax_top computes them. Host arrays; rows and top_k at most what
  // reserve_sampling() reserved (top_k <= kMaxTopLogprobs). false (nothing done) where unsupported:
  // the caller computes them from the logits on the host.
  static constexpr int kMaxTopLogprobs = 20;
  virtual bool score_rows(const Tensor& logits, int rows, int limit, const int32_t* targets, int top_k,
                          RowScore* out, TopToken* top) {
    return false;
  }
  // Logprobs of device-sampled rows: keep_rows copies rows[0..n) (host indices) of `logits` aside
  // before constraints and sampling change them; *kept ([n, V] F32) holds them until the next call,
  // for constrain_logits (the masks) and score_rows once the tokens are drawn. false (nothing done)
  // where unsupported or past the rows reserve_kept_rows() reserved.
  virtual void reserve_kept_rows(int rows, int64_t vocab) {}
  virtual bool keep_rows(const Tensor& logits, const int32_t* rows, int n, Tensor* kept) { return false; }
  // Constrained decoding: row r keeps logit t where bit t of masks[r * words ...] is set (the
  // rest become -inf), then the biases are added; `masks` and `bias` are host arrays uploaded
  // into buffers reserved by reserve_constraints(). false (nothing done) where unsupported or
  // over capacity: the caller then applies them on the host.
  virtual void reserve_constraints(int max_rows, int words, int max_bias) {}
  virtual bool constrain_logits(const Tensor& logits, int rows, const uint32_t* masks, int words,
                                const std::vector<LogitBias>& bias) {
    return false;
  }
  // Tensor parallelism: this backend is rank tp_rank() of tp_size(), each rank holding a shard of
  // the weights. Collectives are enqueued in step order like any op and pair up with the same
  // call on every other rank (each rank runs on a thread of its own). One rank: no-ops.
  virtual int tp_rank() const { return 0; }
  virtual int tp_size() const { return 1; }
  // x = the sum over the ranks of x, in place (F32 or act dtype).
  virtual void all_reduce(Tensor x) {}
  // A row-parallel projection's partial sums into the next add + RMSNorm: residual += (sum over
  // the ranks of x); out = rms_norm(residual) * w. x is left unspecified. One kernel where the
  // backend can fuse them.
  virtual void all_reduce_add_rms_norm(Tensor residual, Tensor x, const Tensor& w, float eps, Tensor out) {
    all_reduce(x);
    add_rms_norm(residual, x, w, eps, out);
  }
  // The vocab-parallel LM head's logits: out[i, r * cols + j] = rank r's local[i, j] for j < cols,
  // cut at out.cols() (F32; local [rows, >= cols] of the same shape on every rank). `workspace`
  // holds all_gather_workspace_bytes(local) bytes.
  virtual size_t all_gather_workspace_bytes(const Tensor& local) const { return 0; }
  virtual void all_gather_cols(const Tensor& local, int64_t cols, Tensor out, void* workspace) {}
  // The calling thread works for this backend from here on (CUDA: makes its device current).
  virtual void bind_thread() {}

  // Scratch the attention op needs for a step of up to max_seqs sequences (AttnMeta::workspace).
  virtual size_t attention_workspace_bytes(int max_seqs, int num_heads, int head_dim) const {
    return 0;
  }
  // Free and total device memory in bytes (0, 0 where unknown).
  virtual void memory_info(size_t* free, size_t* total) const { *free = *total = 0; }

  // Per-op-family device time (GEMM, attention, norms, ...) measured with events around each
  // op while enabled; report() synchronises and returns (family, total ms, calls) since enable.
  struct ProfileEntry {
    std::string family;
    double ms = 0;
    int64_t calls = 0;
  };
  // Range probe (eager steps): while on, the largest |value| written into a 16-bit activation
  // is recorded (+inf after a non-finite one); a backend without 16-bit activations records 0.
  virtual void probe_activation_range(bool on) {}
  virtual double probed_activation_range() const { return 0.0; }

  virtual void set_profiling(bool on) {}
  virtual std::vector<ProfileEntry> profile_report() { return {}; }

  // Before graphs are captured: the backend may time its choices for the projections `same` (one
  // shape; outputs of out_dtype) at these token counts. Returns the choices made and changed.
  virtual std::pair<int, int> tune_linears(const std::vector<const Linear*>& same, DType out_dtype,
                                           const std::vector<int>& token_counts) {
    return {0, 0};
  }
  // CUDA graphs: record what `fn` enqueues once, replay it later with new data in the same
  // buffers. Backends without graphs report false and are run eagerly.
  virtual bool supports_graphs() const { return false; }
  virtual int capture_graph(const std::function<void()>& fn) { return -1; }
  virtual void replay_graph(int id) {}
};

}  // namespace lite_llama::ops

// Kernel entry points: raw pointers, sizes and a stream; each returns the launch status.
// `act` selects the 16-bit activation type (true: bf16, false: fp16). Shapes are on the fields.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "ops/sample_row.h"

namespace lite_llama::cuda {

enum class Act { BF16, F16 };

// Tensor parallelism: the one-shot peer all-reduce (kernels/allreduce.cu). Every rank's signal
// block and two staging buffers (16-byte units) are reachable from every rank (peer access).
constexpr int kPeerArMaxRanks = 8;
constexpr int kPeerArBlocks = 32;
constexpr int kPeerArThreads = 512;
struct PeerArSignal {
  uint32_t start[kPeerArBlocks][kPeerArMaxRanks];  // written by the peers: their call number
  uint32_t counter[kPeerArBlocks];                 // this rank's calls so far, per block
};
struct PeerArArgs {
  void* x = nullptr;  // this rank's message, summed in place
  int64_t units = 0;  // 16-byte units of it
  int rank = 0, size = 1;
  PeerArSignal* signal[kPeerArMaxRanks] = {};
  void* staging[kPeerArMaxRanks][2] = {};
};
// Mixture of experts (kernels/moe.cu). Router: softmax of logits [tokens, experts] (act type) in
// fp32, the top_k in descending order (lowest index on ties), renormalised when norm_topk_prob.
constexpr int kMoeMaxExperts = 256;
constexpr int kMoeMaxTopK = 16;
// pdl: launched with programmatic dependent launch (pdl.cuh); it waits before reading the logits.
cudaError_t moe_route(Act act, const void* logits, int tokens, int experts, int top_k, bool norm_topk_prob,
                      int32_t* t_expert, float* t_weight, cudaStream_t s, bool pdl = false);
// One stacked expert matrix: rows of the act type (kind -1), or GQ rows (core/gq.h) of GqArgs
// kind 0 (int8), 1 (int4) or 2 (fp8) with `group` weights per (s, m) pair (0: one per row; else a
// power of two, at least 16 for int8 / fp8 and 32 for int4; rows of a multiple of 32 weights).
struct MoeWeights {
  const void* data = nullptr;
  int kind = -1;
  int group = 0;
};
// How the decode-sized MoE path runs (filled from CudaTuning::moe_*). pdl: its kernels (the two
// grouped GEMVs, the combine) with programmatic dependent launch, the gate|up GEMV after the
// routing, the down one after the gate|up one (which must itself have waited for the routing);
// l2_prefetch: bytes of each weight row fetched into L2 while a block gathers and stages its
// assignments (steps of up to 16 assignments); row_groups / few_row_groups: row groups of its
// expert (32 rows each) a block takes after one prologue in steps of more than / up to 16
// assignments (>= 1); mma: 16-bit rows on mma.sync; preload (mma): a block requests its first
// weights as soon as it knows its expert (before it gathers, waits and stages) and, where its
// assignments are staged once, the next row group's before it sums the current one's.
struct MoeGemvTuning {
  bool pdl = false;
  int l2_prefetch = 1024;
  int row_groups = 1, few_row_groups = 1;
  bool mma = true, preload = false;
};
// Experts: weights stacked [experts, 2 * ffn, hidden] (gate rows, then up rows) and
// [experts, hidden, ffn], each in its own format (MoeWeights); x [tokens, hidden] act; out
// [tokens, hidden] fp32 or act. The workspace pointers carve moe_workspace_bytes(tokens, top_k,
// ...) bytes.
struct MoeArgs {
  Act act = Act::BF16;
  int tokens = 0, top_k = 0, experts = 0, hidden = 0, ffn = 0;
  const void* x = nullptr;
  MoeWeights gate_up, down;
  const int32_t* t_expert = nullptr;
  const float* t_weight = nullptr;
  void* out = nullptr;
  bool out_f32 = false;
  void* workspace = nullptr;  // moe_workspace_bytes(tokens, top_k, experts, hidden, ffn) bytes
  int gemv_max_assign = -1;   // CudaTuning::moe_gemv_max_assign
  MoeGemvTuning gemv;
};
cudaError_t moe_experts(const MoeArgs& a, cudaStream_t s);
size_t moe_workspace_bytes(int tokens, int top_k, int experts, int hidden, int ffn);

// elem_kind: 0 fp32, 1 fp16, 2 bf16.
cudaError_t peer_all_reduce(const PeerArArgs& a, int elem_kind, cudaStream_t s);
// a.x (fp32 [rows, n]) summed over the ranks and added to residual (fp32); out (act) =
// rms_norm(residual) * w. Uses staging and signals of its own (not peer_all_reduce's). n <= 8192.
// pdl (both): launched with PDL after the row-parallel projection, whose output it reads only
// after pdl_wait().
cudaError_t peer_all_reduce_add_rms_norm(const PeerArArgs& a, Act act, int rows, int n, float* residual,
                                         const float* w, float eps, void* out, cudaStream_t s, bool pdl = false);
// The same for small messages over the low-latency channel: each rank pushes its rows straight
// into every peer's receive buffer, two values and the call number in each 16-byte store, and
// polls its own buffer: one one-way NVLink trip, no flags or fences apart from the data.
// recv[r]: rank r's buffer of 2 x size x cap_lines 16-byte lines; counter: this rank's calls per
// block (kPeerArBlocks). rows * n / 2 <= cap_lines, n % 2 == 0, n <= 8192.
struct PeerLLArgs {
  int rank = 0, size = 1;
  int64_t cap_lines = 0;
  void* recv[kPeerArMaxRanks] = {};
  uint32_t* counter = nullptr;
};
// batch_poll: a thread polls all its lines of a source at once (CudaTuning::peer_ll_batch_poll).
cudaError_t peer_ll_all_reduce_add_rms_norm(const PeerLLArgs& a, Act act, const float* x, int rows, int n,
                                            float* residual, const float* w, float eps, void* out, cudaStream_t s,
                                            bool pdl = false, bool batch_poll = false);

// How the one-token GEMV kernel runs (CudaTuning): max_blocks > 0, on at most that many blocks,
// each looping over row groups (gemv1_loop_blocks_per_sm); ordered_prefetch, its first weights
// loaded before the PDL wait with ordinary loads, which ptxas keeps there (gemv1_ordered_prefetch).
// Both are bitwise equal to the default kernel.
struct Gemv1Options {
  int max_blocks = 0;
  bool balanced = false;  // one token: even rounds of groups (CudaTuning::gemv1_loop_balanced)
  bool ordered_prefetch = false;
  int num_sms = 0;  // with max_blocks: at most as many blocks as the GPU holds at once (0: unchecked)
};

// out[t, n] = sum_k x[t, k] * w[n, k] (+ bias[n]) for T <= 8 tokens; out is act or f32.
// pdl: the kernel for up to kGemv1MaxTokens tokens and K % 64 == 0 (gemv1, which the fused forms
// below also use) is launched with programmatic dependent launch (sm_90+, pdl.cuh).
inline constexpr int kGemv1MaxTokens = 2;
cudaError_t gemv(Act act, const void* x, const void* w, const void* bias, void* out, bool out_f32,
                 int T, int N, int K, int ldo, cudaStream_t s, bool pdl = false, Gemv1Options opt = {});
// The same for T <= kGemv1MaxTokens tokens whose input is swiglu(gate_up) (gate_up: [T, 2K] act),
// computed and rounded to act as cuda::swiglu does, so the result equals swiglu then gemv bit for bit.
// gemv_swiglu_fits(K): K % 64 == 0 and K <= 8192 (above, the recomputation costs more than the
// launch it saves).
bool gemv_swiglu_fits(int K);
cudaError_t gemv_swiglu(Act act, const void* gate_up, const void* w, const void* bias, void* out, bool out_f32,
                        int T, int N, int K, cudaStream_t s, bool pdl = false, Gemv1Options opt = {});

// out[t, F] = silu(g) * u for T <= kGemv1MaxTokens tokens, g | u = x [gate (F rows) | up (F rows)]^T
// (+ bias), each rounded to act first: equal to gemv into [T, 2F] then swiglu bit for bit, in one
// launch.
// gemv_gate_up_swiglu_fits(F, K): F even, K % 64 == 0.
bool gemv_gate_up_swiglu_fits(int F, int K);
cudaError_t gemv_gate_up_swiglu(Act act, const void* x, const void* w, const void* bias, void* out, int T, int F,
                                int K, cudaStream_t s, bool pdl = false, Gemv1Options opt = {});

// Quantised weights in the GQ layout (core/gq.h). kind: 0 int8, 1 int4, 2 fp8 (GqKind order);
// group 0 = one (scale, offset) pair per row; row_bytes = the row stride.
struct GqArgs {
  int kind;
  int group;
  size_t row_bytes;
  bool pdl = false;  // launch with programmatic dependent launch (pdl.cuh; the GPU must have it)
  int num_sms = 0;   // the device's SMs (CudaDevice::sm_count): gemv_gq, gemv_gq16 and gemm_gq_mma size grids by it
};
constexpr int kGqGemvMaxTokens = 8;
constexpr int kGqMaxK = 65536;  // the integer path's activation scratch holds rows up to this
// The integer GEMV's activations: codes [T, K] (int8, or int16 when wide), then per block of 32
// (scale d, sum of x over its first 16, over its last 16, sum of the codes) at kGqXsOffset.
constexpr size_t kGqXsOffset = size_t(kGqGemvMaxTokens) * kGqMaxK * 2;
constexpr size_t kGqScratchBytes = kGqXsOffset + size_t(kGqGemvMaxTokens) * (kGqMaxK / 32) * 16;
// That scratch and the form of its codes: int16 (d = amax / 32767 per block of 32, dp2a products:
// activations as precise as fp16's, the default) or int8 (amax / 127, dp4a: llama.cpp's scheme).
// nibble (int16 only): each 8 codes stored as pairs (x0, x4), (x1, x5), (x2, x6), (x3, x7), the
// order of int4 weights' nibbles, so that the int4 GEMV reads its dp2a operands as they are.
struct GqX {
  void* scratch = nullptr;
  bool wide = true;
  bool nibble = false;
  int form() const { return wide ? (nibble ? 2 : 1) : 0; }  // the kernels' code (common.cuh)
};
// out[t, n] = sum_k x[t, k] * dequant(w)[n, k] (+ bias[n]) for T <= kGqGemvMaxTokens. With
// xq.scratch, int8 / int4 weights take the integer path: x quantised per block of 32 (int16 or
// int8 codes, see GqX), integer dot products; without it they keep 16-bit activations
// (gemv_gq16), and fp8 takes the CUDA-core fp32 path (gemv_gq_fp32).
// x_ready: the scratch already holds x's integer form (written by the producing norm / SwiGLU).
cudaError_t gemv_gq(Act act, const GqArgs& q, const void* x, const void* w, const void* bias, void* out,
                    bool out_f32, int T, int N, int K, int ldo, GqX xq, bool x_ready, cudaStream_t s);
// The same product with 16-bit activations for int8 / int4 weights (kernels/gq_gemv16.cu): the
// codes dequantised in registers straight into tensor-core fragments, fp32 accumulation.
cudaError_t gemv_gq16(Act act, const GqArgs& q, const void* x, const void* w, const void* bias, void* out,
                      bool out_f32, int T, int N, int K, int ldo, cudaStream_t s);
// The CUDA-core GEMV with fp32 math on 16-bit activations (every kind; fp8's decode path).
cudaError_t gemv_gq_fp32(Act act, const GqArgs& q, const void* x, const void* w, const void* bias, void* out,
                         bool out_f32, int T, int N, int K, int ldo, cudaStream_t s);
// The same product for kGqGemvMaxTokens < T <= kGqMmaMaxTokens (and fp8 from 3 tokens) on tensor
// cores, weights dequantised in registers (also decode steps above CudaTuning::gq_dp4a_max_tokens);
// `ws` (ws_bytes) holds split-K fp32 partials.
constexpr int kGqMmaMaxTokens = 256;
constexpr int kGqMmaMaxTokensInt8 = 128;  // int8 dequantises slower: tiles + cuBLASLt win above (H100)
cudaError_t gemm_gq_mma(Act act, const GqArgs& q, const void* x, const void* w, const void* bias, void* out,
                        bool out_f32, int T, int N, int K, int ldo, void* ws, size_t ws_bytes, cudaStream_t s);
// FP8 W8A8 through cuBLASLt (sm_89+) for per-channel fp8 weights from kFp8GemmMinTokens tokens:
// x[T, K] -> e4m3 codes [T, K] and one scale per row (amax / 448) ...
constexpr int kFp8GemmMinTokens = 32;  // measured crossover against the W8A16 GEMM (H100)
cudaError_t quantize_rows_fp8(Act act, const void* x, int T, int K, void* codes, float* scales, cudaStream_t s);
// ... and the weights' per-row scale s (the fp16 at code_bytes of each GQ row) as fp32 out[N].
cudaError_t gq_row_scales(const void* w, size_t row_bytes, size_t code_bytes, int N, float* out, cudaStream_t s);
// dst[i, :] = dequant(w row (rows ? rows[i] : row0 + i)) as 16-bit activations, rows of K.
// f32_out: dst is fp32 (the embedding into the fp32 residual stream), else of type `act`.
cudaError_t dequant_gq(Act act, const GqArgs& q, const void* w, const int32_t* rows, int row0, int n, int K,
                       void* dst, cudaStream_t s, bool f32_out = false);
// 16-bit src[N, K] -> GQ dst (N rows of q.row_bytes), round to nearest.
cudaError_t quantize_gq(Act act, const GqArgs& q, const void* src, void* dst, int N, int K, cudaStream_t s);

// With xq.scratch (kGqScratchBytes, layout of gemv_gq's), the output's integer form is written
// there too; only where *_quantizes_x(rows, n) holds.
// The two views of that scratch: the codes [T, K], then per-32 (d, sum lo16, sum hi16, code sum).
inline void gq_x_views(void* scratch, void** codes, float4** xs) {
  *codes = scratch;
  *xs = reinterpret_cast<float4*>(static_cast<uint8_t*>(scratch) + kGqXsOffset);
}
bool norm_quantizes_x(int rows, int n);
// x_f32 / residual_f32: the residual stream (x of rms_norm) is fp32, else of the activation type.
// pdl: launched with programmatic dependent launch (it waits before reading anything).
cudaError_t rms_norm(Act act, bool x_f32, const void* x, const float* w, float eps, void* out, int rows, int n,
                     cudaStream_t s, GqX xq = {nullptr}, bool pdl = false);
// residual += x; out = rms_norm(residual) * w
// x_f32: the added x is fp32 too (the projections writing into an fp32 residual stream).
cudaError_t add_rms_norm(Act act, bool residual_f32, bool x_f32, void* residual, const void* x, const float* w,
                         float eps, void* out, int rows, int n, cudaStream_t s, GqX xq = {nullptr},
                         bool pdl = false);

// qkv[T, (Hq + 2 Hkv) D] -> q_out[T, Hq D] (rotated, optionally head-normed), K/V into the pool.
struct RopeKvArgs {
  const void* qkv;
  void* q_out;
  void* k_pool;  // [slots, Hkv, D]
  void* v_pool;
  const float* q_norm;  // [D] or null
  const float* k_norm;
  float eps;
  const int32_t* positions;  // [T]
  const int32_t* slots;      // [T]
  const float* cos_sin;      // [max_pos, rot_dim]
  int rot_dim;
  bool interleaved;
  int T, Hq, Hkv, D;
};
cudaError_t qkv_rope_store(Act act, const RopeKvArgs& a, cudaStream_t s, bool pdl = false);
// The QKV projection of one token (x [1, K], w [(Hq + 2 Hkv) D, K] 16-bit) and qkv_rope_store of
// its products (a.qkv unused) in one GEMV launch, bit for bit what gemv then qkv_rope_store store.
// gemv_rope_store_fits: one token, full rotary (rot_dim == D, D % 4 == 0), no q/k norm (its
// per-head sum of squares spans the GEMV's blocks), K % 64 == 0.
bool gemv_rope_store_fits(const RopeKvArgs& a, int K);
cudaError_t gemv_rope_store(Act act, const void* x, const void* w, const void* bias, const RopeKvArgs& a, int K,
                            cudaStream_t s, bool pdl = false, Gemv1Options opt = {});

struct AttnArgs {
  const void* q;       // [T, Hq, D]
  const void* k_pool;  // [slots, Hkv, D]
  const void* v_pool;
  void* out;           // [T, Hq, D]
  const int32_t* b_q_start;
  const int32_t* b_q_len;
  const int32_t* b_seq_len;
  const int32_t* b_req_idx;
  const int32_t* req_to_slot;
  int req_stride;
  int num_seqs;
  int max_q_len;
  int max_seq_len;
  int Hq, Hkv, D;
  float scale;
  // [num_seqs][2] or null: (s, n) with key i < n of the sequence at slot s + i (ops::AttnMeta::
  // b_kv_runs). Decode splits inside such a run compute their K/V addresses, with no slot-id trip.
  const int32_t* b_kv_runs = nullptr;
};
// Causal attention of packed variable-length queries (prefill chunks), tensor cores (mma.sync).
// splits > 1 cuts each query tile's keys over that many blocks and merges them: `partial` holds
// num_tokens * Hq * splits * (D + 2) floats (num_tokens: rows of q, decode rows included).
// wgmma: with splits == 1 (or any with wgmma_split), the sm_90a kernel below where it was built
// (the caller checks the GPU). wg3_waves: CudaTuning::prefill_wg3_waves, against num_sms
// (CudaDevice::sm_count; the wgmma kernel at D 64 needs it). splits must come from prefill_splits
// with the same wgmma and wgmma_split.
cudaError_t attention_prefill(Act act, const AttnArgs& a, int splits, float* partial, cudaStream_t s,
                              bool wgmma = false, int wg3_waves = 3, int num_sms = 0, bool wgmma_split = false);
// The same on Hopper's wgmma (sm_90a only; cudaErrorNotSupported where the binary holds no sm_90a
// code, which attention_prefill_sm90_built tells); splits > 1 merges by attention_prefill_merge.
cudaError_t attention_prefill_sm90(Act act, const AttnArgs& a, int splits, float* partial, cudaStream_t s,
                                   int wg3_waves, int num_sms);
bool attention_prefill_sm90_built();
// One row's split partials (`partial` as attention_prefill's) merged into a.out: a block of D
// threads per (query token, head, sequence).
cudaError_t attention_prefill_merge(const AttnArgs& a, int splits, const float* partial, cudaStream_t s, bool bf16);
// Blocks of an unsplit prefill grid of `rows` (token, head) rows a block: query tiles x KV heads x
// sequences (0 for a GQA group the block cannot hold).
inline long prefill_grid_blocks(const AttnArgs& a, int rows) {
  const int G = a.Hkv > 0 ? a.Hq / a.Hkv : 0;
  if (G < 1 || G > rows) return 0;
  const int tokens = rows / G;
  return long((a.max_q_len + tokens - 1) / tokens) * a.Hkv * a.num_seqs;
}
// Blocks of that kernel's grid at two warpgroups (128 rows a block; 0 for a group it cannot take).
long attention_prefill_sm90_blocks(const AttnArgs& a);
// Whether an unsplit prefill grid hands out the longest query tiles of every head and sequence
// first (up to 8 MiB of 16-bit K and V) rather than one head's at a time (attention_tile.cuh).
constexpr double kPrefillInterleaveMaxKv = 8 << 20;
inline bool prefill_interleaves(int max_seq_len, int num_seqs, int kv_heads, int head_dim) {
  return double(max_seq_len) * num_seqs * kv_heads * head_dim * 4 <= kPrefillInterleaveMaxKv;
}
// Key splits for a prefill call whose query tiles fill less than half of the GPU: about one wave
// of blocks, >= 256 keys a split, num_tokens * splits <= max_rows. wgmma (the caller's GPU runs
// the sm_90a kernel): 1 wherever that kernel's unsplit grid fills half of the SMs, where it beats
// the split mma.sync blocks; below that, with wgmma_split (CudaTuning::prefill_wgmma_split), splits
// of the wgmma grid (one block an SM, >= kSm90MinSplitKeys keys a split), else of the mma.sync one.
constexpr int kSm90MinSplitKeys = 512;
int prefill_splits(const AttnArgs& a, int num_tokens, int num_sms, int max_rows, bool wgmma = false,
                   bool wgmma_split = false);
// Flash-decoding for q_len == 1 sequences: split-KV partitions then a log-sum-exp merge.
// `partial` holds num_seqs * Hq * splits * (D + 2) floats. min_keys: the floor of keys a split,
// the same for both calls. decode_splits sizes the grid (<= 64 splits, about one wave of blocks at
// the ring's `stages`, decode_stages) for up to max_seq_len keys at >= min_keys keys a split (64
// when 0); at run time a sequence's splits hold >= min_keys keys each (0: its keys spread over all
// splits).
int decode_splits(int num_seqs, int Hkv, int head_dim, int max_seq_len, int num_sms, int min_keys, int stages);
// Bytes of `partial` that any batch of up to max_seqs decodes needs (decode_splits' worst case).
size_t decode_workspace_bytes(int max_seqs, int num_heads, int head_dim, int num_sms);
// Rows (token x split) a head that decode_workspace_bytes holds for any max_seqs >= 1: the bound
// for prefill_splits.
int workspace_rows_per_head(int head_dim, int num_sms);
// The K/V ring stages attention_decode should take for a batch, which decode_splits sizes its wave
// by: at D 64 `stages` (CudaTuning::decode_stages, 4) where three-stage blocks could not fill a wave
// (batch 1), else 3.
int decode_stages(int num_seqs, int Hkv, int head_dim, int num_sms, int stages);
// pdl: launched with programmatic dependent launch (sm_90+, pdl.cuh) after the RoPE + KV write,
// whose new keys and queries it reads only after pdl_wait().
// stages: the K/V ring of split sequences at head dim 64, 3 or 4 (three tiles in flight a block).
// max_carveout: both kernels at the largest shared-memory carveout (CudaTuning::decode_max_carveout).
cudaError_t attention_decode(Act act, const AttnArgs& a, int splits, int min_keys, float* partial,
                             cudaStream_t s, bool pdl = false, int stages = 3, bool max_carveout = true);
#ifdef LITE_LLAMA_DECODE_TIMELINE
// Diagnostic builds (kernels/decode_timeline.cuh): clear, and read back, the blocks' records.
void decode_timeline_reset();
std::vector<unsigned long long> decode_timeline_read();
void decode_timeline_dump(FILE* f, const char* head);
#endif

bool swiglu_quantizes_x(int T, int F);
cudaError_t swiglu(Act act, const void* gate_up, void* out, int T, int F, cudaStream_t s,
                   GqX xq = {nullptr});
// out[i, :] = table[ids[i], :] (16-bit rows of width n, of type `table_type`); f32_out: converted
// to fp32 (the residual stream), else copied.
cudaError_t embedding(Act table_type, const void* table, const int32_t* ids, void* out, int count, int n,
                      bool f32_out, cudaStream_t s);
cudaError_t gather_rows(const void* x, const int32_t* rows, void* out, int count, size_t row_bytes,
                        cudaStream_t s);
cudaError_t write_slot_table(int32_t* table, int stride, const int32_t* t_req, const int32_t* t_pos,
                             const int32_t* t_slots, int n, cudaStream_t s);
// out[t, n] += bias[n] for an F32 output and a 16-bit bias.
cudaError_t add_bias_f32(Act act, float* out, const void* bias, int T, int N, cudaStream_t s);
// Element conversions for uploads and dummy weights.
cudaError_t convert_f32(Act act, const float* src, void* dst, size_t n, cudaStream_t s);
cudaError_t random_fill(Act act, void* dst, size_t n, uint64_t seed, float scale, cudaStream_t s);
// Samples one token per row: penalties (repetition over prompt+output, presence/frequency over
// output), temperature, top-k, top-p, min-p, then an inverse-CDF draw in vocabulary order from a
// counter-based RNG. temperature == 0 rows take the argmax. Modifies `logits` in place.
// pen_tokens/pen_counts: token ids and output counts (-1: seen in the prompt only).
cudaError_t sample_rows(float* logits, int rows, int V, int limit, const ops::SampleRow* args,
                        const int32_t* pen_tokens, const int32_t* pen_counts, int32_t* out,
                        cudaStream_t s);
// Backend::constrain_logits: logits[r, t] = -inf where bit t of masks[r * words + t / 32] is
// clear (columns t < words * 32; masks may be null), then logits[row, token] += bias for each
// of the n_bias entries (bias may be null). Device pointers.
cudaError_t constrain_rows(float* logits, int rows, int V, const uint32_t* masks, int words,
                           const ops::LogitBias* bias, int n_bias, cudaStream_t s);
// Backend::score_rows on device arrays: out[rows], top[rows * top_k].
cudaError_t score_rows(const float* logits, int rows, int V, int limit, const int32_t* targets, int top_k,
                       ops::RowScore* out, ops::TopToken* top, cudaStream_t s);
// out[r] = argmax over the first `limit` columns of logits[r, :V] (lowest index on ties).
cudaError_t argmax_rows(const float* logits, int rows, int V, int limit, int32_t* out,
                        cudaStream_t s);

}  // namespace lite_llama::cuda

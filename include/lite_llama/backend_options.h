// Which backend runs a model and how it is tuned. Filled once at the top (the CLI's flags and the
// documented LITE_LLAMA_* environment variables in tools/, the server's start, the Python module)
// and passed down as it is: nothing below tools/ reads the environment for these.
#pragma once
#include <string>

namespace lite_llama {

enum class DeviceKind { Auto, Cpu, Cuda };   // auto: CUDA when a device is present
// CUDA activation type. Auto: fp16 (10-bit mantissa, closer to the fp32 reference) where the
// model's activations fit its range, measured by one forward of a calibration text at load;
// bf16 where they do not.
enum class ActType { Auto, BF16, FP16 };
// Weight storage on the GPU: Auto keeps a file's quantisation (GGUF blocks repacked, GPTQ/AWQ as
// stored) and 16-bit weights as they are; None dequantises everything; Int8 / Int4 / Fp8 quantise
// at load.
enum class QuantMode { Auto, None, Int8, Int4, Fp8 };
// CPU kernel instruction set: Auto picks the widest the CPU runs (the binary holds all of them).
enum class CpuIsaChoice { Auto, Generic, Avx2, Avx512 };

// Each parser throws a one-line lite_llama::Error naming the flag for any other spelling.
DeviceKind parse_device(const std::string& s);   // auto | cpu | cuda
ActType parse_act_type(const std::string& s);    // auto | bf16 | fp16
QuantMode parse_quant_mode(const std::string& s);  // auto | none | int8 | int4 | fp8
CpuIsaChoice parse_cpu_isa(const std::string& s);  // auto | generic | avx2 | avx512
const char* device_kind_name(DeviceKind d);
const char* act_type_name(ActType a);
const char* quant_mode_name(QuantMode m);

// CUDA kernel choices; the defaults are the measured best (docs/benchmarks/gpu.md).
struct CudaTuning {
  // Most tokens a 16-bit linear runs on the CUDA-core GEMV instead of cuBLASLt (0-8); up to 2 take
  // the GEMV with the fused SwiGLU forms (3-8 a plainer one). -1: 2 where gemv1_loop_blocks_per_sm
  // resolves to looping blocks (an H200: batch-2 steps 0.4-9% faster than with cuBLASLt, batch 1 equal),
  // else 1 (on an H100 the older 2-token GEMV lost to cuBLASLt; this one is not measured there).
  int gemv_max_tokens = -1;
  // Before CUDA graphs are captured, each 16-bit projection's cuBLASLt algorithm for every graph
  // batch size it runs on cuBLASLt is chosen by timing the heuristic's first 8 over the model's
  // weights of that shape (Gemm::tune; LITE_LLAMA_GEMM_TUNE=1). H200 (docs/benchmarks/gpu.md):
  // single products 2-12% faster on many shapes, decode steps at batch 4-64 -3.9% to +1.0%, and
  // 0.1-1.1 s more to load. Off by default: the choice can differ between runs where candidates
  // time within noise of each other, and with it the rounding of those products.
  bool gemm_tune = false;
  // Flash-decoding splits hold at least this many keys (0: the grid assumes 64 keys a split and
  // a sequence spreads over all of them).
  int decode_split_keys = 16;
  // Largest token count for the quantised tensor-core GEMM; -1 = the per-format default, 0 =
  // dequantised tiles + cuBLASLt from 9 tokens.
  int gq_mma_max_tokens = -1;
  // Quantised weights at decode: steps of up to gq_dp4a_max_tokens tokens (0-8) run an integer
  // GEMV on activations quantised per block of 32: int16 codes and dp2a by default (each x moves
  // by at most amax / 65534: as close to the fp32 reference as 16-bit activations), int8 codes
  // and dp4a with gq_int8_act (llama.cpp's scheme: faster at one token, but its rounding moves
  // logits by ~1 and greedy text off the fp32 reference's); gq_fp32 keeps 16-bit activations
  // there too. Other steps of up to 8 tokens keep 16-bit activations on a GEMV that dequantises
  // into tensor-core fragments (gemv_gq16), longer ones on the tensor-core GEMM, as prefill does.
  // -1: the measured best (H100, docs/benchmarks/gpu.md): with int16 codes 2, with int8 codes
  // int4 3 and int8 4.
  int gq_dp4a_max_tokens = -1;
  bool gq_int8_act = false;
  bool gq_fp32 = false;
  // FP8 W8A8 through cuBLASLt (compute capability 8.9+) for per-channel fp8 weights, from
  // fp8_gemm_min_tokens tokens (-1 = the built-in default).
  bool fp8_gemm = true;
  int fp8_gemm_min_tokens = -1;
  // The one-token down projection computes its SwiGLU input itself (one launch fewer, but every
  // block recomputes the K inputs) up to this K; 0: never.
  int swiglu_gemv_max_k = 8192;
  // One-token 16-bit GEMVs on at most this many blocks an SM, each looping over its row groups
  // and requesting the next group's weights before the current group's sums meet; 0: a block
  // for each group of 4 rows; -1: 4 on one GPU whose peak memory bandwidth is at least 32 GB/s
  // an SM (an H200's 37, not an H100's 25), else 0. On an H100 4 (and 3) made batch-1 steps
  // 0.5-3.3% slower (Llama-3.2-1B and Qwen3-4B at 128 and 16k-32k tokens, Qwen3-30B-A3B), on an
  // H200 up to 4.9% faster (docs/benchmarks/gpu.md), and at tp 2 on two H200s 1.2% slower.
  int gemv1_loop_blocks_per_sm = -1;
  // A looping one-token GEMV (a single token, not two) spreads its row groups evenly: as many
  // rounds as the block bound needs, and the fewest blocks that take them, so that no block
  // ends a round early. H200, batch-1 steps at prompt 128 (docs/benchmarks/gpu.md): Llama-3.2-3B
  // 2.197 -> 2.046 ms, Qwen3-4B 2.741 -> 2.583, Qwen2.5-3B 2.175 -> 2.151, Llama-3.2-1B 0.886 ->
  // 0.875. Two tokens keep the bound as it is (Qwen2.5-3B batch 2 was 1.9% slower balanced).
  bool gemv1_loop_balanced = true;
  // The one-token 16-bit GEMV requests its first weights before its PDL wait with ordinary loads
  // instead of read-only ones: with read-only loads ptxas places the wait before them, so the
  // weights are only requested once the kernel before has finished. -1: on with tensor
  // parallelism, where a GEMV follows each all-reduce's NVLink round trip (Llama-3.1-8B batch 1,
  // tp 2 step: 2 x H200 2.712 -> 2.658 ms, 2 x H100 3.365 -> 3.332 ms), off on one GPU (Llama-3.2-1B at 128 tokens,
  // batch 1 / 8: 0.9% / 1.4% slower; docs/benchmarks/pdl.md); 0 off, 1 on. Bitwise equal either way.
  int gemv1_ordered_prefetch = -1;
  // The one-token gate|up projection of 16-bit weights applies the SwiGLU to its products (one
  // launch fewer; the down projection then reads plain activations). Where it runs,
  // swiglu_gemv_max_k no longer applies.
  bool gate_up_swiglu = true;
  // The one-token QKV projection of 16-bit weights rotates its q / k products and stores them and
  // v where the RoPE + KV write would (one launch fewer a layer; not with q / k norms (Qwen3) or
  // partial rotary, which keep the separate kernel). -1: on with tensor parallelism (Llama-3.1-8B
  // batch-1 step at tp 2 on 2 x H100: 3.281 -> 3.229 ms), off on one GPU (tp 1: 5.455 -> 5.490 ms;
  // docs/benchmarks/tensor-parallel.md); 0 off, 1 on. Bitwise equal either way.
  int qkv_rope_gemv = -1;
  // Programmatic dependent launch where the GPU has it (sm_90+) for the quantised kernels, and
  // for the 16-bit one-token GEMV when pdl_gemv is also set (H100, batch 1: 0.6-1.8% faster on
  // Llama-3.2-1B/3B, Qwen2.5-3B, Qwen3-4B; docs/benchmarks/gpu.md).
  bool pdl = true;
  bool pdl_gemv = true;
  // With pdl: decode attention starts beside the RoPE + KV write on the keys of earlier steps,
  // and its merge beside it.
  bool pdl_attention = true;
  // K/V ring stages of split decode attention at head dim 64: 4 keeps three tiles in flight a
  // block (the query tile moved into the ring so that three blocks still fit an SM), and is taken
  // only where three-stage blocks (four an SM) could not fill a wave within 64 splits a sequence
  // (batch 1 at 8 KV heads); 3 (two tiles in flight) everywhere else, and everywhere when set to 3.
  int decode_stages = 4;
  // The split decode kernel and its merge ask for the largest shared-memory carveout. An SM runs
  // blocks of one L1 / shared split at a time: merge blocks at the default (evidently smaller)
  // carveout kept the next decode call's split blocks off their SMs until they ended (H100,
  // attention-bench --decode under PDL: 92 of 392 blocks started 2.4 us late at batch 1, D 64).
  // With it, batch-1 calls are 1.3-6.4% faster; model steps are unchanged
  // (docs/benchmarks/long-context.md).
  bool decode_max_carveout = true;
  // Decode attention splits whose keys lie in a sequence's contiguous run of KV slots (what a
  // fresh pool hands a prompt) compute the K/V addresses instead of reading the slot table: one
  // dependent trip less before the first K/V byte (docs/benchmarks/long-context.md).
  bool decode_kv_runs = true;
  // With pdl: the RMSNorms and the RoPE + KV write are launched while the projection before them
  // finishes, and wait for it inside.
  bool pdl_norm = true;
  // With pdl: the tensor-parallel all-reduce + add + RMSNorm is launched while the row-parallel
  // projection before it drains, and waits for it inside.
  bool pdl_all_reduce = true;
  // The low-latency all-reduce + norm polls all of a thread's lines from a peer at once (one L2
  // round trip a try) instead of one line after another (one round trip a line). 2 x H100,
  // Llama-3.1-8B: tp 2 step 3.331 -> 3.280 ms at batch 1, 4.037 -> 3.993 at batch 8
  // (docs/benchmarks/tensor-parallel.md).
  bool peer_ll_batch_poll = true;
  // Prefill chunks whose keys are not split run on the wgmma kernel (attention_prefill_sm90.cu)
  // where the GPU is sm_90 and the binary holds sm_90a code; false: the mma.sync kernel.
  bool prefill_wgmma = true;
  // With prefill_wgmma: a short chunk after a long prefix (the next turn of a chat), whose unsplit
  // wgmma grid fills less than half the SMs, splits its keys over wgmma blocks; false: over
  // mma.sync blocks (prefill_splits).
  bool prefill_wgmma_split = true;
  // At head dim 64 the wgmma kernel takes three warpgroups (192 rows a block) where that grid
  // fills at least this many waves of one block an SM, else two (0: always three; a large value:
  // always two). More rows a block run faster on long prompts (H200, 32k: 5.4%) and slower on
  // small grids (eight 128-token prompts: 20 against 18 us, H200).
  int prefill_wg3_waves = 3;
  // The residual stream in fp32 (the fused add + RMSNorm reads and writes fp32 and hands 16-bit
  // normalised activations on), as the fp32 reference and llama.cpp keep it; false: 16-bit.
  bool fp32_residual = true;
  // Tensor parallelism: all-reduces of up to this many KiB run the one-shot peer kernel (GPUs of
  // one process with peer access; ~2x faster than NCCL's ring at decode sizes), larger ones NCCL;
  // 0: NCCL for all.
  int peer_all_reduce_max_kib = 4096;
  // Mixture of experts: steps of up to this many token-expert assignments run the sort-free
  // grouped GEMV, larger ones the expert-sorted tensor-core GEMM (-1: 4 per expert for 16-bit
  // experts, 1 for int8 / int4 ones, at most 1,024; 0: always the GEMM). H100, Qwen3-30B-A3B:
  // the GEMV is 1.29x / 1.36x / 1.02x faster at batch 1 / 8 / 64, the GEMM 3.9x at a 128-token
  // prefill (1,024 assignments).
  int moe_gemv_max_assign = -1;
  // With pdl: the decode-sized MoE kernels (routing, the two grouped GEMVs, the combine) start
  // while the kernel before them finishes; the down GEMV finds its expert, gathers its assignments
  // and fetches its first weights into L2 before it waits for the gate|up products.
  bool pdl_moe = true;
  // Bytes of each of its weight rows a grouped-GEMV block fetches into L2 while it gathers and
  // stages its assignments (rounded up to 512), in steps of up to 16 assignments (larger ones:
  // none).
  int moe_l2_prefetch = 1024;
  // Grouped GEMV in steps of more than 16 assignments: row groups (32 rows each) of its expert
  // one block takes after one prologue (finding its expert, gathering and staging its
  // assignments); 1: one group a block. H100, Qwen3-30B-A3B batch 64: 4 is 8.4% faster than 1,
  // 2 7.7%, 8 and 16 slower (too few blocks); batch 1 (<= 16 assignments) is not affected.
  int moe_gemv_row_groups = 4;
  // Grouped GEMV over 16-bit experts on tensor cores (mma.sync, 32 weights of two rows a lane
  // step) instead of FMAs: far fewer instructions a byte of weights. H100, Qwen3-30B-A3B: batch
  // 1 / 8 / 64 steps 1.6% / 3.8% / 16.8% faster. Quantised experts keep the FMA kernel.
  bool moe_gemv_mma = true;
  // Grouped GEMV in steps of up to 16 assignments: row groups of its expert one block takes
  // after one prologue (as moe_gemv_row_groups for larger steps).
  int moe_gemv_few_row_groups = 2;
  // Tensor-core grouped GEMV with K <= 1,024 (the down product) in steps of up to 16
  // assignments: a block requests its first weights as soon as it knows its expert (before it
  // gathers its assignments, waits for the gate|up GEMV and stages them) and the next row group's
  // before the current one's sums meet. With moe_gemv_few_row_groups 2, Qwen3-30B-A3B batch 1:
  // 3.1% faster than neither on an H200 (preload alone 0.4%), 2-3% on an H100 (docs/benchmarks/moe.md).
  bool moe_gemv_preload = true;
  // Debugging: every op's output is copied back and checked for NaN / inf (eager steps only).
  bool check_finite = false;
  // Diagnostic builds only (-DLITE_LLAMA_DECODE_TIMELINE=ON): the file the backend writes its
  // run's decode attention timeline to when destroyed (tools/kernel_bench/decode_timeline.py); empty: none.
  std::string decode_timeline_out;
};

struct CpuTuning {
  // Activations quantised to Q8_1 and integer dot products for Q4/Q8 weights (as llama.cpp
  // does): faster on some machines, not bit-close to an fp32 reference.
  bool q8_activations = false;
  // Projections of Q4_0/Q4_1/Q8_0 weights with activations as int16 codes per 32-block
  // (d = amax / 32767) and exact integer dot products, at every token count (so a token's
  // result never depends on its batch); other weight types keep fp32 activations.
  // q8_activations wins where both are set. Batch-1 decode ~1.7-2x the fp32 path on a Zen 4,
  // prefill ~7% slower, greedy still equal to HF fp32 on the e2e fixtures, logits off by ~1e-3
  // (docs/benchmarks/cpu.md).
  bool int16_activations = true;
  // KV cache stored as F16 (fp32 math): half the memory and the long-context attention traffic,
  // at ~1e-3 relative rounding of K and V (not bit-close to an fp32 reference).
  bool kv_f16 = false;
  // Kernel instruction set (tests and measurements force one; Auto is the fastest the CPU has).
  CpuIsaChoice isa = CpuIsaChoice::Auto;
  // Bind each compute thread to one CPU. Off: no faster on a 2-core Zen 4 VM within run-to-run
  // noise (docs/benchmarks/cpu.md), and a pinned thread cannot move away from another process.
  bool pin_threads = false;
};

struct BackendOptions {
  DeviceKind device = DeviceKind::Auto;
  int threads = 0;  // CPU threads, 0 = all cores
  ActType dtype = ActType::Auto;
  QuantMode quantize = QuantMode::Auto;
  CudaTuning cuda;
  CpuTuning cpu;
};

}  // namespace lite_llama

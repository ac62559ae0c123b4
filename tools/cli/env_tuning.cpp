#include "env_tuning.h"

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <string>

#include "core/error.h"

namespace lite_llama::cli {
namespace {

const char* env(const char* name) { return std::getenv(name); }
// Strict: atoi read "abc" as 0, and a flag set to anything but its off value turned it on
// (LITE_LLAMA_CPU_Q8=0 chose int8 activations).
void env_int(const char* name, int& field) {
  const char* e = env(name);
  if (!e) return;
  const char* end = e + std::strlen(e);
  int v = 0;
  const auto [p, ec] = std::from_chars(e, end, v);
  LL_CHECK(ec == std::errc() && p == end, "{} must be an integer, got '{}'", name, e);
  field = v;
}
void env_flag(const char* name, bool& field) {
  const char* e = env(name);
  if (!e) return;
  LL_CHECK(std::string(e) == "0" || std::string(e) == "1", "{} must be 0 or 1, got '{}'", name, e);
  field = e[0] == '1';
}

}  // namespace

void apply_env_tuning(BackendOptions& o) {
  CudaTuning& c = o.cuda;
  env_int("LITE_LLAMA_GEMV_MAX", c.gemv_max_tokens);
  env_flag("LITE_LLAMA_GEMM_TUNE", c.gemm_tune);
  env_int("LITE_LLAMA_DECODE_SPLIT_KEYS", c.decode_split_keys);
  env_int("LITE_LLAMA_DECODE_STAGES", c.decode_stages);
  env_flag("LITE_LLAMA_DECODE_MAX_CARVEOUT", c.decode_max_carveout);
  env_flag("LITE_LLAMA_DECODE_KV_RUNS", c.decode_kv_runs);
  c.decode_split_keys = std::max(0, c.decode_split_keys);
  env_int("LITE_LLAMA_GQ_MMA_MAX", c.gq_mma_max_tokens);
  env_int("LITE_LLAMA_FP8_GEMM_MIN", c.fp8_gemm_min_tokens);
  env_flag("LITE_LLAMA_GQ_FP32", c.gq_fp32);
  env_int("LITE_LLAMA_GQ_DP4A_MAX", c.gq_dp4a_max_tokens);
  env_flag("LITE_LLAMA_GQ_INT8_ACT", c.gq_int8_act);
  env_int("LITE_LLAMA_PEER_ALLREDUCE_KIB", c.peer_all_reduce_max_kib);
  c.peer_all_reduce_max_kib = std::max(0, c.peer_all_reduce_max_kib);
  env_int("LITE_LLAMA_SWIGLU_GEMV_MAX_K", c.swiglu_gemv_max_k);
  env_int("LITE_LLAMA_GEMV1_LOOP", c.gemv1_loop_blocks_per_sm);
  c.gemv1_loop_blocks_per_sm = std::max(-1, c.gemv1_loop_blocks_per_sm);
  env_flag("LITE_LLAMA_GEMV1_LOOP_BALANCED", c.gemv1_loop_balanced);
  env_int("LITE_LLAMA_GEMV1_ORDERED_PREFETCH", c.gemv1_ordered_prefetch);
  c.gemv1_ordered_prefetch = std::clamp(c.gemv1_ordered_prefetch, -1, 1);
  env_flag("LITE_LLAMA_GATE_UP_SWIGLU", c.gate_up_swiglu);
  env_int("LITE_LLAMA_QKV_ROPE_GEMV", c.qkv_rope_gemv);
  c.qkv_rope_gemv = std::clamp(c.qkv_rope_gemv, -1, 1);
  env_int("LITE_LLAMA_MOE_GEMV_MAX", c.moe_gemv_max_assign);
  env_int("LITE_LLAMA_MOE_L2_PREFETCH", c.moe_l2_prefetch);
  c.moe_l2_prefetch = std::max(0, c.moe_l2_prefetch);
  env_int("LITE_LLAMA_MOE_GEMV_ROW_GROUPS", c.moe_gemv_row_groups);
  c.moe_gemv_row_groups = std::max(1, c.moe_gemv_row_groups);
  env_int("LITE_LLAMA_MOE_GEMV_FEW_ROW_GROUPS", c.moe_gemv_few_row_groups);
  c.moe_gemv_few_row_groups = std::max(1, c.moe_gemv_few_row_groups);
  env_flag("LITE_LLAMA_MOE_GEMV_PRELOAD", c.moe_gemv_preload);
  env_flag("LITE_LLAMA_MOE_GEMV_MMA", c.moe_gemv_mma);
  env_flag("LITE_LLAMA_PDL_MOE", c.pdl_moe);
  env_flag("LITE_LLAMA_FP32_RESIDUAL", c.fp32_residual);
  env_flag("LITE_LLAMA_FP8_GEMM", c.fp8_gemm);
  env_flag("LITE_LLAMA_PDL", c.pdl);
  env_flag("LITE_LLAMA_PDL_GEMV", c.pdl_gemv);
  env_flag("LITE_LLAMA_PDL_ATTENTION", c.pdl_attention);
  env_flag("LITE_LLAMA_PDL_ALL_REDUCE", c.pdl_all_reduce);
  env_flag("LITE_LLAMA_PEER_LL_BATCH_POLL", c.peer_ll_batch_poll);
  env_flag("LITE_LLAMA_PDL_NORM", c.pdl_norm);
  env_flag("LITE_LLAMA_PREFILL_WGMMA", c.prefill_wgmma);
  env_flag("LITE_LLAMA_PREFILL_WGMMA_SPLIT", c.prefill_wgmma_split);
  env_int("LITE_LLAMA_PREFILL_WG3_WAVES", c.prefill_wg3_waves);
  env_flag("LITE_LLAMA_CHECK_FINITE", c.check_finite);
  if (const char* e = env("LITE_LLAMA_DECODE_TIMELINE_OUT")) c.decode_timeline_out = e;
  env_flag("LITE_LLAMA_CPU_Q8", o.cpu.q8_activations);
  env_flag("LITE_LLAMA_CPU_INT16", o.cpu.int16_activations);
  if (const char* e = env("LITE_LLAMA_CPU_ISA")) o.cpu.isa = parse_cpu_isa(e);
  env_flag("LITE_LLAMA_CPU_KV_F16", o.cpu.kv_f16);
  env_flag("LITE_LLAMA_CPU_PIN", o.cpu.pin_threads);
}

}  // namespace lite_llama::cli

// --load-format dummy (random weights from a config.json, the benchmarks' models): the CPU and
// CUDA engines build the same weights (the same seeded hash on both devices), so their logits
// agree to bf16 rounding. A Qwen2-style config with q/k/v biases guards the bias conversion
// that a loaded model gets from prepare_linear (without it CUDA read the F32 bias as bf16:
// NaN logits in prefill).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "common/test_text.h"
#include "core/error.h"
#include "lite_llama/engine.h"

using namespace lite_llama;

namespace {

// Head dim 64: the CUDA attention kernels take 64 or 128.
constexpr const char* kQwen2Config = R"({
  "architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 256,
  "intermediate_size": 512, "num_attention_heads": 4, "num_key_value_heads": 2,
  "num_hidden_layers": 2, "vocab_size": 512, "max_position_embeddings": 1024,
  "rms_norm_eps": 1e-6, "rope_theta": 1000000.0, "tie_word_embeddings": true, "sliding_window": null
})";

std::vector<float> dummy_logits(const std::string& config, const std::string& device) {
  EngineOptions o;
  o.model = config;
  o.backend.device = parse_device(device);
  o.load_format = "dummy";
  o.backend.threads = 2;
  o.ctx = 128;
  o.max_num_seqs = 4;
  auto e = Engine::create(o);
  std::vector<float> all;
  const std::vector<std::vector<int32_t>> seqs = {{1, 5, 9, 33, 2, 60, 17, 8, 44, 3, 100, 7}, {4, 400, 9}};
  e->score(seqs, 3, [&](int, int, const float* l, int64_t n) { all.insert(all.end(), l, l + n); });
  return all;
}

}  // namespace

TEST(DummyWeights, CudaLogitsMatchCpuWithQkvBias) {
  lite_llama::testing::TempDir dir;
  dir.write("config.json", kQwen2Config);
  const std::string cfg = dir.str() + "/config.json";
  std::vector<float> gpu;
  try {
    gpu = dummy_logits(cfg, "cuda");
  } catch (const Error& e) {
    const std::string msg = e.what();
    if (msg.find("no CUDA") != std::string::npos) GTEST_SKIP() << msg;  // CI: no GPU / no CUDA build
    FAIL() << msg;
  }
  const std::vector<float> cpu = dummy_logits(cfg, "cpu");
  ASSERT_EQ(gpu.size(), cpu.size());
  ASSERT_FALSE(cpu.empty());
  double num = 0, den = 0;
  for (size_t i = 0; i < cpu.size(); ++i) {
    ASSERT_TRUE(std::isfinite(gpu[i])) << "logit " << i;
    num += double(gpu[i] - cpu[i]) * (gpu[i] - cpu[i]), den += double(cpu[i]) * cpu[i];
  }
  // bf16 activations on the GPU against fp32 on the CPU: ~1% (rel-L2); a wrong bias is O(1).
  EXPECT_LT(std::sqrt(num / den), 3e-2);
}

TEST(DummyWeights, HugeStepBudgetIsCutToWhatAStepCanHold) {
  // --max-batched-tokens 1,048,576 with 4 sequences of at most 128 tokens: the step buffers are
  // sized for the 512 tokens a step can hold (14 KiB a token here), not for 14 GiB.
  lite_llama::testing::TempDir dir;
  dir.write("config.json", kQwen2Config);
  EngineOptions o;
  o.model = dir.str() + "/config.json";
  o.backend.device = parse_device("cpu");
  o.load_format = "dummy";
  o.backend.threads = 2;
  o.ctx = 128;
  o.max_num_seqs = 4;
  o.max_batched_tokens = 1 << 20;
  auto e = Engine::create(o);
  EXPECT_LT(e->info().activation_bytes, size_t(16) << 20);
  const std::vector<std::vector<int32_t>> seqs = {std::vector<int32_t>(100, 7), {4, 400, 9}};
  size_t rows = 0;
  e->score(seqs, 3, [&](int, int, const float* l, int64_t n) {
    for (int64_t i = 0; i < n; ++i) ASSERT_TRUE(std::isfinite(l[i]));
    ++rows;
  });
  EXPECT_GT(rows, 0u);
}

// A Qwen3-MoE config with a dense layer among sparse ones: dummy experts drawn by the backend
// (never as a host copy of the file's size), routed, and the logits finite and not constant.
TEST(DummyWeights, MoeConfigRunsOnTheCpu) {
  lite_llama::testing::TempDir dir;
  dir.write("config.json", R"({
    "architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe", "hidden_size": 128,
    "intermediate_size": 256, "moe_intermediate_size": 64, "num_experts": 16,
    "num_experts_per_tok": 4, "norm_topk_prob": true, "decoder_sparse_step": 1,
    "mlp_only_layers": [1], "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64,
    "num_hidden_layers": 3, "vocab_size": 512, "max_position_embeddings": 1024,
    "rms_norm_eps": 1e-6, "rope_theta": 1000000.0, "tie_word_embeddings": false
  })");
  const std::vector<float> cpu = dummy_logits(dir.str() + "/config.json", "cpu");
  ASSERT_EQ(cpu.size(), size_t(11 + 2) * 512);  // every position but the last of each sequence
  float lo = cpu[0], hi = cpu[0];
  for (float v : cpu) {
    ASSERT_TRUE(std::isfinite(v));
    lo = std::min(lo, v), hi = std::max(hi, v);
  }
  EXPECT_GT(hi - lo, 1e-2f);
}

// Without --ctx a sequence may use the model's whole context: up to 131,072 tokens on a GPU, 8,192
// on the CPU, and never more than the KV pool holds; --ctx beyond the model's is an error.
namespace {
int64_t default_ctx_of(const std::string& device, int model_ctx, int64_t kv_tokens, int ctx = 0) {
  lite_llama::testing::TempDir dir;
  std::string cfg = kQwen2Config;
  const std::string key = "\"max_position_embeddings\": 1024";
  cfg.replace(cfg.find(key), key.size(), "\"max_position_embeddings\": " + std::to_string(model_ctx));
  dir.write("config.json", cfg);
  EngineOptions o;
  o.model = dir.str() + "/config.json";
  o.backend.device = parse_device(device);
  o.load_format = "dummy";
  o.backend.threads = 2;
  o.max_num_seqs = 2;
  o.kv_tokens = kv_tokens;
  o.ctx = ctx;
  return Engine::create(o)->info().ctx;
}
}  // namespace

TEST(DummyWeights, DefaultContextOnTheCpu) {
  EXPECT_EQ(default_ctx_of("cpu", 1024, 0), 1024);
  EXPECT_EQ(default_ctx_of("cpu", 200000, 0), 8192);
  EXPECT_EQ(default_ctx_of("cpu", 200000, 3000), 3000);  // cut to the pool
  EXPECT_EQ(default_ctx_of("cpu", 200000, 0, 20000), 20000);
  EXPECT_THROW(default_ctx_of("cpu", 1024, 0, 2048), Error);
}

TEST(DummyWeights, DefaultContextOnAGpu) {
  try {
    EXPECT_EQ(default_ctx_of("cuda", 40960, 0), 40960);
    EXPECT_EQ(default_ctx_of("cuda", 200000, 0), 131072);
    EXPECT_EQ(default_ctx_of("cuda", 200000, 5000), 5000);
  } catch (const Error& e) {
    const std::string msg = e.what();
    if (msg.find("no CUDA") != std::string::npos) GTEST_SKIP() << msg;  // CI: no GPU / no CUDA build
    FAIL() << msg;
  }
}

// Every supported HF architecture against HF transformers: tiny random checkpoints under
// tests/fixtures/models/ (scripts/fixtures/make_arch_fixtures.py) with the logits and greedy
// continuations transformers computed from the same files. Covers llama (llama3 rope scaling,
// GQA, sharded bf16), llama-linear (linear scaling, MHA, tied, fp16, transformers-4 config
// layout), qwen2 (q/k/v bias), qwen3 (q/k norm, head_dim != hidden/heads, sharded fp32) and
// mistral (bf16), qwen3-moe (Qwen3-MoE: routed experts, top-2 renormalised, per-expert tensors,
// sharded bf16) and qwen3-moe-mixed (a dense layer among sparse ones, top-3 of 4 without
// renormalisation, transformers 5's fused expert tensors, tied, fp32) and qwen3-moe-q8_0 (a
// GGUF of qwen3-moe in llama.cpp's qwen3moe layout, Q8_0, stacked experts) and qwen3-moe-q4_k
// (a GGUF with Q4_K experts of 256-long rows, tied; both by
// scripts/fixtures/make_moe_gguf_fixture.py). Runs on the CPU; no downloaded model needed.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "lite_llama/engine.h"
#include "model/model_config.h"
#include "model/weights.h"

using namespace lite_llama;
using nlohmann::json;

namespace {

const std::vector<std::string> kModels = {"llama", "llama-linear", "qwen2", "qwen3", "mistral",
                                          "qwen3-moe", "qwen3-moe-mixed", "qwen3-moe-q8_0",
                                          "qwen3-moe-q4_k"};

std::string model_dir(const std::string& name) {
  return std::string(LL_SOURCE_DIR) + "/tests/fixtures/models/" + name;
}

json load_reference(const std::string& name) {
  std::ifstream in(model_dir(name) + "/reference.json");
  return json::parse(in);
}

// The directory (HF) or the file a GGUF fixture names.
std::string model_path(const std::string& name) {
  const json ref = load_reference(name);
  return ref.contains("model_file") ? model_dir(name) + "/" + ref["model_file"].get<std::string>() : model_dir(name);
}

std::vector<std::vector<int32_t>> sequences(const json& ref) {
  std::vector<std::vector<int32_t>> s;
  for (const auto& c : ref["cases"]) s.push_back(c["ids"].get<std::vector<int32_t>>());
  return s;
}

std::unique_ptr<Engine> open(const std::string& name, const CpuTuning& tuning = {}) {
  EngineOptions o;
  o.model = model_path(name);
  o.backend.device = DeviceKind::Cpu;
  o.backend.cpu = tuning;
  o.ctx = 128;
  o.kv_tokens = 512;
  return Engine::create(o);
}

class ArchFixture : public ::testing::TestWithParam<std::string> {};

// Bound: both sides run the same fp32 function of the same weights (bf16/fp16 files widen to
// fp32 exactly on both; for the MoE models the fixture script keeps only draws where every
// token's k-th and (k+1)-th router logits are >= 1e-3 apart, so both pick the same experts).
// They differ only in summation order (dot products of <= 256 terms over
// 2-3 layers), rotary cos/sin rounding and exp/rsqrt ulps, which gives relative differences of
// ~1e-6..1e-5 of the logit scale (here |logits| <= ~5). We allow 1e-4 absolute, i.e. ~2e-5
// of the largest logit: a dropped bias, a wrong rope frequency, a missing q/k norm or a GQA
// mix-up each move logits by 1e-2 or more. Measured max |diff| is printed (~5e-6).
// That is the fp32 path. With CpuTuning::int16_activations (the default), the int16 codes of
// Q4_0/Q4_1/Q8_0 linears move each input of those by up to amax_block / 65534; measured
// 1.9e-4 (qwen3-moe-q8_0) and 5.4e-4 (qwen3-moe-q4_k) at every position (the others have no
// such weights), so that setting gets 1e-3: still 10x below those bugs.
constexpr double kLogitTol = 1e-4;
constexpr double kLogitTolInt16 = 1e-3;

TEST_P(ArchFixture, EveryPositionLogitsMatchHf) {
  const json ref = load_reference(GetParam());
  const auto seqs = sequences(ref);
  std::ifstream in(model_dir(GetParam()) + "/" + ref["logits_file"].get<std::string>(),
                   std::ios::binary);
  const int64_t V = ref["info"]["vocab_size"];
  size_t rows = 0;
  for (const auto& s : seqs) rows += s.size() - 1;
  std::vector<float> want(rows * size_t(V));
  in.read(reinterpret_cast<char*>(want.data()), std::streamsize(want.size() * 4));
  ASSERT_TRUE(in.good()) << "short logits file";
  std::vector<size_t> first_row(seqs.size(), 0);
  for (size_t i = 1; i < seqs.size(); ++i) first_row[i] = first_row[i - 1] + seqs[i - 1].size() - 1;

  for (bool int16 : {false, true}) {
  CpuTuning tuning;
  tuning.int16_activations = int16;
  auto e = open(GetParam(), tuning);
  const double tol = int16 ? kLogitTolInt16 : kLogitTol;
  // decode_tail 0: every position through packed prefill; 7: the last 7 positions of each
  // sequence (all of the 2-token one) through batched flash-decoding over the KV slots.
  for (int tail : {0, 7}) {
    double max_diff = 0, max_abs = 0, max_decode_diff = 0;
    int decoded = 0;
    std::vector<int> seen(rows, 0);
    LogitsSink sink = [&](int s, int pos, const float* l, int64_t n) {
      ASSERT_EQ(n, V);
      const size_t r = first_row[size_t(s)] + size_t(pos);
      ++seen[r];
      // Rows at or past the prefill length come from decode steps.
      const bool decode = pos >= std::max(1, int(seqs[size_t(s)].size()) - tail);
      decoded += decode;
      for (int64_t v = 0; v < V; ++v) {
        const double w = want[r * size_t(V) + size_t(v)], d = std::fabs(double(l[v]) - w);
        max_diff = std::max(max_diff, d);
        if (decode) max_decode_diff = std::max(max_decode_diff, d);
        max_abs = std::max(max_abs, std::fabs(w));
      }
    };
    e->score(seqs, tail, sink);
    EXPECT_EQ(std::count(seen.begin(), seen.end(), 1), std::ptrdiff_t(rows))
        << "every position exactly once";
    std::printf(
        "%-13s %s decode_tail %d: %zu positions (%d decoded), max |logit diff| %.3g "
        "(decoded rows %.3g; max |logit| %.2f)\n",
        GetParam().c_str(), int16 ? "int16" : "fp32 ", tail, rows, decoded, max_diff, max_decode_diff, max_abs);
    EXPECT_LE(max_diff, tol) << GetParam() << (int16 ? " int16" : " fp32") << " decode_tail " << tail;
  }
  }
}

// HF's greedy continuations, token for token. The fixture script only keeps sequence draws
// whose every greedy step has a top-2 margin >= 2e-3 (recorded), far above kLogitTol.
TEST_P(ArchFixture, GreedyContinuationsEqualHf) {
  const json ref = load_reference(GetParam());
  auto e = open(GetParam());
  SamplingParams p;
  p.temperature = 0;
  p.ignore_eos = true;
  p.max_tokens = ref["new_tokens"];
  const auto seqs = sequences(ref);
  std::map<int64_t, size_t> which;
  std::vector<std::vector<int32_t>> got(seqs.size());
  // All sequences in one batch: packed prefill of different lengths, then batched decode.
  for (size_t i = 0; i < seqs.size(); ++i) which[e->add_request(seqs[i], p)] = i;
  while (e->has_unfinished())
    for (const RequestOutput& r : e->step())
      for (int32_t t : r.tokens) got[which.at(r.id)].push_back(t);
  for (size_t i = 0; i < seqs.size(); ++i)
    EXPECT_EQ(got[i], ref["cases"][i]["greedy_ids"].get<std::vector<int32_t>>())
        << GetParam() << " sequence " << i << " (" << seqs[i].size() << " tokens)";
}

// `lite-llama info` against what the fixture script read from the files: the parameter count
// is the sum of the safetensors tensor sizes, KV bytes per token 2 * layers * kv_heads *
// head_dim * 4 (fp32 K and V on the CPU).
TEST_P(ArchFixture, CliInfoDescribesTheModel) {
  const json want = load_reference(GetParam())["info"];
  const std::string cmd = std::string("'") + LL_CLI_PATH + "' info --json --device cpu -m '" +
                          model_path(GetParam()) + "' 2>/dev/null";
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  ASSERT_EQ(pclose(p), 0) << cmd;
  const json got = json::parse(out);
  EXPECT_EQ(got["format"], want.value("format", "hf"));
  EXPECT_EQ(got["architecture"], want["architecture"]);
  EXPECT_EQ(got["parameters"], want["parameters"]);
  EXPECT_EQ(got["weight_dtype"], want.contains("weight_dtype") ? want["weight_dtype"] : want["safetensors_dtypes"][0]);
  EXPECT_EQ(got["context_length"], want["context_length"]);
  EXPECT_EQ(got["vocab_size"], want["vocab_size"]);
  EXPECT_EQ(got["num_layers"], want["num_layers"]);
  EXPECT_EQ(got["num_heads"], want["num_heads"]);
  EXPECT_EQ(got["num_kv_heads"], want["num_kv_heads"]);
  EXPECT_EQ(got["head_dim"], want["head_dim"]);
  EXPECT_EQ(got["tied_embeddings"], want["tied_embeddings"]);
  EXPECT_EQ(got["rope_scaling"],
            want["rope_scaling"] == "default" ? json("none") : want["rope_scaling"]);
  EXPECT_EQ(got["kv_bytes_per_token"], want["kv_bytes_per_token_cpu"]);
  EXPECT_EQ(got["num_experts"], want.value("num_experts", 0));
  EXPECT_EQ(got["experts_per_token"], want.value("experts_per_token", 0));
  EXPECT_EQ(got["expert_intermediate_size"], want.value("expert_intermediate_size", 0));
}

// Mistral 7B v0.1 declares a 4096-token sliding window; full attention equals it up to that
// length, so the loader caps the context there instead of computing something else beyond.
TEST(HfMistral, SlidingWindowCapsTheContext) {
  namespace fs = std::filesystem;
  const fs::path d = fs::temp_directory_path() / ("ll_mistral_sw_" + std::to_string(getpid()));
  fs::remove_all(d);
  fs::copy(model_dir("mistral"), d, fs::copy_options::recursive);
  json c = json::parse(std::ifstream(d / "config.json"));
  c["sliding_window"] = 32;
  std::ofstream(d / "config.json") << c.dump(2);
  EngineOptions o;
  o.model = d.string();
  o.backend.device = DeviceKind::Cpu;
  o.kv_tokens = 64;
  std::unique_ptr<Engine> e;
  EXPECT_NO_THROW(e = Engine::create(o));
  if (e) {
    EXPECT_EQ(e->info().context_length, 32);
    EXPECT_THROW(e->add_request(std::vector<int32_t>(40, 1), SamplingParams{}), std::exception);
  }
  fs::remove_all(d);
}

INSTANTIATE_TEST_SUITE_P(Hf, ArchFixture, ::testing::ValuesIn(kModels), [](const auto& i) {
  std::string n = i.param;
  std::replace(n.begin(), n.end(), '-', '_');
  return n;
});

}  // namespace

// Qwen3-30B-A3B's real config.json (tests/gpu/configs, for dummy-weight runs on a GPU): every
// layer sparse with 128 experts of FFN 768, 8 active; 30.5B parameters as Qwen's model card
// says. The exact count, by hand from the checkpoint's tensor shapes: per layer q 2048x4096,
// k and v 2048x512, o 4096x2048 (18,874,368), two norms of 2048 and q/k norms of 128 (4,352),
// router 128x2048 (262,144), experts 128 x 3 x 2048x768 (603,979,776) = 623,120,640; x 48 =
// 29,909,790,720; plus embedding and untied head 2 x 151,936x2048 and the final norm:
// 30,532,122,624. Its dummy weights are shapes only on the host (data == nullptr): the backend
// draws them on its device.
TEST(Qwen3Moe, ThirtyBConfigAndDummyShapes) {
  const ModelConfig c =
      config_from_hf_json(std::string(LL_SOURCE_DIR) + "/tests/gpu/configs/qwen3-30b-a3b.json");
  EXPECT_EQ(c.arch, "qwen3moe");
  EXPECT_EQ(c.num_experts, 128);
  EXPECT_EQ(c.num_experts_per_tok, 8);
  EXPECT_EQ(c.moe_intermediate_size, 768);
  EXPECT_TRUE(c.norm_topk_prob);
  EXPECT_FALSE(c.has_dense_layers());
  EXPECT_EQ(count_parameters(c), 30532122624);
  auto src = dummy_weight_source(c, 1);
  for (int l : {0, 47}) {
    const Tensor* router = src->find(WeightRole::Router, l);
    ASSERT_NE(router, nullptr);
    EXPECT_EQ(router->data, nullptr);
    EXPECT_EQ(src->find(WeightRole::Gate, l), nullptr);  // no dense MLP
    for (int e : {0, 127}) {
      const auto g = src->find_expert(WeightRole::ExpertGate, l, e);
      const auto d = src->find_expert(WeightRole::ExpertDown, l, e);
      ASSERT_TRUE(g && d);
      EXPECT_EQ(g->data, nullptr);
      EXPECT_EQ(g->shape[0], 768);
      EXPECT_EQ(g->shape[1], 2048);
      EXPECT_EQ(d->shape[0], 2048);
      EXPECT_EQ(d->shape[1], 768);
    }
    EXPECT_FALSE(src->find_expert(WeightRole::ExpertUp, l, 128).has_value());
  }
}

// Tensor parallelism on the CPU (issue 27): each fixture model split over 2 and 4 CPU ranks (one
// thread each, a shared-memory all-reduce standing in for NCCL) against HF transformers' logits
// and greedy continuations for the same files (the fixtures of test_arch_fixtures.cpp), and
// against the unsharded engine. The sharded forward sums the row-parallel projections' partial
// products in another order, so logits differ from tp 1 by float rounding only.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "lite_llama/engine.h"
#include "model/model_config.h"
#include "model/tp_shard.h"

using namespace lite_llama;
using nlohmann::json;

namespace {

std::string model_dir(const std::string& name) {
  return std::string(LL_SOURCE_DIR) + "/tests/fixtures/models/" + name;
}

json reference(const std::string& name) { return json::parse(std::ifstream(model_dir(name) + "/reference.json")); }

std::vector<std::vector<int32_t>> sequences(const json& ref) {
  std::vector<std::vector<int32_t>> s;
  for (const auto& c : ref["cases"]) s.push_back(c["ids"].get<std::vector<int32_t>>());
  return s;
}

std::unique_ptr<Engine> open(const std::string& name, int tp) {
  EngineOptions o;
  o.model = model_dir(name);
  o.backend.device = DeviceKind::Cpu;
  o.backend.threads = 1;
  o.ctx = 128;
  o.kv_tokens = 512;
  o.tp = tp;
  return Engine::create(o);
}

// Every position's logits, in score() order: [rows][V].
std::vector<std::vector<float>> all_logits(Engine& e, const std::vector<std::vector<int32_t>>& seqs, int tail) {
  std::vector<size_t> first(seqs.size(), 0);
  size_t rows = 0;
  for (size_t i = 0; i < seqs.size(); ++i) first[i] = rows, rows += seqs[i].size() - 1;
  std::vector<std::vector<float>> out(rows);
  e.score(seqs, tail, [&](int s, int pos, const float* l, int64_t n) {
    out[first[size_t(s)] + size_t(pos)].assign(l, l + n);
  });
  return out;
}

struct Case {
  std::string model;
  int tp;
};

class TpFixture : public ::testing::TestWithParam<Case> {};

// The same bound as test_arch_fixtures.cpp's (1e-4 absolute at |logits| <= ~5): a rank's wrong
// head, KV head or vocabulary slice moves logits by 1e-2 or more.
constexpr double kLogitTol = 1e-4;

TEST_P(TpFixture, LogitsMatchHfAndTheUnshardedModel) {
  const auto [name, tp] = GetParam();
  const json ref = reference(name);
  const auto seqs = sequences(ref);
  const int64_t V = ref["info"]["vocab_size"];
  size_t rows = 0;
  for (const auto& s : seqs) rows += s.size() - 1;
  std::vector<float> want(rows * size_t(V));
  std::ifstream in(model_dir(name) + "/" + ref["logits_file"].get<std::string>(), std::ios::binary);
  in.read(reinterpret_cast<char*>(want.data()), std::streamsize(want.size() * 4));
  ASSERT_TRUE(in.good());

  auto one = open(name, 1);
  auto split = open(name, tp);
  EXPECT_EQ(split->info().tp, tp);
  EXPECT_EQ(split->info().num_heads, one->info().num_heads);  // the model's, not a rank's
  for (int tail : {0, 7}) {  // packed prefill, then the last 7 positions through decode steps
    const auto a = all_logits(*one, seqs, tail), b = all_logits(*split, seqs, tail);
    ASSERT_EQ(b.size(), rows);
    double hf = 0, vs_one = 0;
    for (size_t r = 0; r < rows; ++r) {
      ASSERT_EQ(int64_t(b[r].size()), V) << "row " << r;
      for (int64_t v = 0; v < V; ++v) {
        hf = std::max(hf, std::fabs(double(b[r][size_t(v)]) - want[r * size_t(V) + size_t(v)]));
        vs_one = std::max(vs_one, std::fabs(double(b[r][size_t(v)]) - a[r][size_t(v)]));
      }
    }
    std::printf("%-12s tp %d decode_tail %d: max |logit diff| vs HF %.3g, vs tp 1 %.3g\n", name.c_str(), tp, tail,
                hf, vs_one);
    EXPECT_LE(hf, kLogitTol) << name << " tp " << tp;
    EXPECT_LE(vs_one, kLogitTol) << name << " tp " << tp;
  }
}

// HF's greedy continuations of all sequences as one continuous batch (packed prefill of mixed
// lengths, then batched decode), token for token.
TEST_P(TpFixture, GreedyContinuationsEqualHf) {
  const auto [name, tp] = GetParam();
  const json ref = reference(name);
  const auto seqs = sequences(ref);
  auto e = open(name, tp);
  SamplingParams p;
  p.temperature = 0;
  p.ignore_eos = true;
  p.max_tokens = ref["new_tokens"];
  std::map<int64_t, size_t> which;
  std::vector<std::vector<int32_t>> got(seqs.size());
  for (size_t i = 0; i < seqs.size(); ++i) which[e->add_request(seqs[i], p)] = i;
  while (e->has_unfinished())
    for (const RequestOutput& r : e->step())
      for (int32_t t : r.tokens) got[which.at(r.id)].push_back(t);
  for (size_t i = 0; i < seqs.size(); ++i)
    EXPECT_EQ(got[i], ref["cases"][i]["greedy_ids"].get<std::vector<int32_t>>()) << name << " tp " << tp << " seq " << i;
}

// llama: 8 heads / 2 KV heads (tp 4 replicates each KV head on two ranks), untied head, V 1000;
// qwen2: q/k/v biases split with their rows; qwen3: q/k norms, tied head; llama-linear: fp16,
// MHA; mistral: 6 heads, bf16.
INSTANTIATE_TEST_SUITE_P(Cpu, TpFixture,
                         ::testing::Values(Case{"llama", 2}, Case{"llama", 4}, Case{"llama", 8}, Case{"qwen2", 2},
                                           Case{"qwen2", 4}, Case{"qwen3", 2}, Case{"qwen3", 4},
                                           Case{"llama-linear", 2}, Case{"mistral", 2}),
                         [](const auto& info) {
                           std::string n = info.param.model + "_tp" + std::to_string(info.param.tp);
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

// The sharding arithmetic: each rank's shapes, its KV heads, and the vocabulary rows.
TEST(TpShard, ShapesAndVocabularyRows) {
  ModelConfig c;
  c.num_heads = 32, c.num_kv_heads = 8, c.intermediate_size = 14336, c.vocab_size = 128256, c.head_dim = 128;
  const ModelConfig l = shard_config(c, {1, 4});
  EXPECT_EQ(l.num_heads, 8);
  EXPECT_EQ(l.num_kv_heads, 2);
  EXPECT_EQ(l.intermediate_size, 3584);
  EXPECT_EQ(l.vocab_size, 128256);  // token ids and gathered logits stay whole
  EXPECT_EQ(vocab_shard_rows(128256, 4), 32064);
  EXPECT_EQ(vocab_table_rows(128256, 4), 32128);  // + the zero row, to a multiple of 64
  EXPECT_EQ(vocab_shard_rows(1000, 3), 334);  // the last rank's shard is padded with zero rows
  c.num_kv_heads = 2;
  EXPECT_EQ(shard_config(c, {3, 8}).num_kv_heads, 1);  // replicated: 4 ranks share each KV head
}

TEST(TpShard, RefusesWhatDoesNotSplit) {
  ModelConfig c;
  c.num_heads = 8, c.num_kv_heads = 2, c.intermediate_size = 256, c.vocab_size = 1000, c.head_dim = 16;
  EXPECT_NO_THROW(check_tp(c, 4));
  EXPECT_THROW(check_tp(c, 3), std::exception);   // heads
  EXPECT_THROW(check_tp(c, 16), std::exception);  // more ranks than heads
  c.intermediate_size = 250;
  EXPECT_THROW(check_tp(c, 4), std::exception);  // MLP columns
  c.intermediate_size = 256, c.num_experts = 4;
  EXPECT_THROW(check_tp(c, 2), std::exception);  // experts are not split yet
  c.num_experts = 0, c.o_bias = true;
  EXPECT_THROW(check_tp(c, 2), std::exception);  // each rank would add the o_proj bias
}

// Bad --tp values are one-line errors with exit code 2.
TEST(TpCli, BadTpIsAOneLineError) {
  for (const std::string args : {"--tp 3 -m '" + model_dir("llama") + "'", "--tp 2 -m '" + model_dir("qwen3-moe") + "'",
                                 "--tp 0 -m '" + model_dir("llama") + "'"}) {
    const std::string cmd = std::string("'") + LL_CLI_PATH + "' generate --device cpu -n 2 -p hi " + args + " 2>&1";
    FILE* p = popen(cmd.c_str(), "r");
    ASSERT_NE(p, nullptr);
    std::string out;
    char buf[4096];
    for (size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
    const int status = pclose(p);
    EXPECT_NE(status, 0) << cmd;
    EXPECT_NE(out.find("tp"), std::string::npos) << out;
    EXPECT_LE(std::count(out.begin(), out.end(), '\n'), 2) << out;
  }
}

}  // namespace

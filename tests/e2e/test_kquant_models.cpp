// GGUF K-quants end to end against HF transformers: tiny random Llama models quantized by
// llama.cpp to Q4_K_M, Q5_K_M and Q6_K (tests/fixtures/kquants/, made by
// scripts/fixtures/make_kquant_fixtures.py; their projections, embedding and LM head are Q4_K,
// Q5_K and Q6_K, see reference.json's tensor_types). transformers dequantised the same files
// to fp32 and recorded each seed prompt's ids, first-step logits and greedy 32-token
// continuation. Runs on the CPU; no downloaded model needed.
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

using namespace lite_llama;
using nlohmann::json;

namespace {

const std::vector<std::string> kQuants = {"Q4_K_M", "Q5_K_M", "Q6_K"};

std::string fixture_dir() { return std::string(LL_SOURCE_DIR) + "/tests/fixtures/kquants/"; }

json file_ref(const std::string& quant) {
  std::ifstream in(fixture_dir() + "reference.json");
  return json::parse(in)["files"][quant];
}

std::unique_ptr<Engine> open(const json& ref) {
  EngineOptions o;
  o.model = fixture_dir() + ref["file"].get<std::string>();
  o.backend.device = DeviceKind::Cpu;
  o.ctx = 256;
  o.kv_tokens = 1024;
  return Engine::create(o);
}

class KQuantModel : public ::testing::TestWithParam<std::string> {};

// The engine reads the files as what they are: K-quant weights (by bytes, the most common type
// is the file's base type) and SmolLM2's truncated tokenizer giving HF's prompt ids.
TEST_P(KQuantModel, LoadsAsKQuantAndTokenizesLikeHf) {
  const json ref = file_ref(GetParam());
  auto e = open(ref);
  EXPECT_EQ(e->info().weight_dtype, GetParam().substr(0, 4));
  EXPECT_EQ(e->info().vocab_size, 2048);
  for (const auto& c : ref["cases"])
    EXPECT_EQ(e->tokenize(c["prompt"].get<std::string>(), true, false),
              c["prompt_ids"].get<std::vector<int32_t>>())
        << c["prompt"];
}

// Bound: both sides compute the same fp32 function of the same dequantised weights (the
// engine's in-register dequantisation equals dequantize_row bit for bit, test_cpu_linear, and
// dequantize_row equals gguf-py's decoders, test_quant). They differ in summation order (dot
// products of K <= 768 over 3 layers), rotary cos/sin rounding and exp/rsqrt ulps: relative
// differences of ~1e-6 of the logit scale (|logits| <= ~7 here). 1e-4 absolute leaves 10x
// room over that and is still far below what a wrong scale, min, nibble or high bit does
// (one swapped sub-block scale moves logits by 1e-2 or more). The measured max is printed.
constexpr double kLogitTol = 1e-4;

// First-step logits: the prompt followed by HF's first greedy token, scored teacher-forced; the
// prompt's last position is the first step. decode_tail 0 runs it through packed prefill, 2
// through a decode step over the KV slots (the final token's own logits are not scored).
TEST_P(KQuantModel, FirstStepLogitsMatchHf) {
  const json ref = file_ref(GetParam());
  auto e = open(ref);
  std::vector<std::vector<int32_t>> seqs;
  std::vector<std::vector<float>> want;
  for (const auto& c : ref["cases"]) {
    std::vector<int32_t> s = c["prompt_ids"].get<std::vector<int32_t>>();
    s.push_back(c["greedy_ids"][0].get<int32_t>());
    seqs.push_back(s);
    std::vector<float> l(2048);
    std::ifstream in(fixture_dir() + c["logits_file"].get<std::string>(), std::ios::binary);
    in.read(reinterpret_cast<char*>(l.data()), std::streamsize(l.size() * 4));
    ASSERT_TRUE(in.good()) << c["logits_file"];
    want.push_back(l);
  }
  for (int tail : {0, 2}) {
    double max_diff = 0, max_abs = 0;
    int checked = 0;
    e->score(seqs, tail, [&](int s, int pos, const float* l, int64_t n) {
      if (pos != int(seqs[size_t(s)].size()) - 2) return;
      ASSERT_EQ(n, 2048);
      ++checked;
      const std::vector<float>& w = want[size_t(s)];
      for (int64_t v = 0; v < n; ++v) {
        max_diff = std::max(max_diff, std::fabs(double(l[v]) - w[size_t(v)]));
        max_abs = std::max(max_abs, std::fabs(double(w[size_t(v)])));
      }
      EXPECT_EQ(std::max_element(l, l + n) - l, std::max_element(w.begin(), w.end()) - w.begin())
          << GetParam() << " prompt " << s;
    });
    EXPECT_EQ(checked, int(seqs.size()));
    std::printf("%-7s decode_tail %d: max |logit diff| %.3g (max |logit| %.2f)\n",
                GetParam().c_str(), tail, max_diff, max_abs);
    EXPECT_LE(max_diff, kLogitTol) << GetParam() << " decode_tail " << tail;
  }
}

// HF's greedy continuations, token for token, all prompts in one batch (packed prefill, then
// batched decode). The fixture script kept the weight draw whose every greedy step of every
// file has a top-2 margin >= 2e-3 (recorded as step_margins), 20x kLogitTol.
TEST_P(KQuantModel, GreedyContinuationsEqualHf) {
  const json ref = file_ref(GetParam());
  auto e = open(ref);
  SamplingParams p;
  p.temperature = 0;
  p.ignore_eos = true;
  p.max_tokens = int(ref["cases"][0]["greedy_ids"].size());
  std::map<int64_t, size_t> which;
  std::vector<std::vector<int32_t>> got(ref["cases"].size());
  for (size_t i = 0; i < got.size(); ++i)
    which[e->add_request(ref["cases"][i]["prompt_ids"].get<std::vector<int32_t>>(), p)] = i;
  while (e->has_unfinished())
    for (const RequestOutput& r : e->step())
      for (int32_t t : r.tokens) got[which.at(r.id)].push_back(t);
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_EQ(got[i], ref["cases"][i]["greedy_ids"].get<std::vector<int32_t>>())
        << GetParam() << " prompt " << i;
}

INSTANTIATE_TEST_SUITE_P(Gguf, KQuantModel, ::testing::ValuesIn(kQuants));

}  // namespace

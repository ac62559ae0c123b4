// `lite-llama bench` on a tiny checkpoint (CPU): the JSON it writes, and --prompt-lens (one
// prompt length per request, cycled over the batch; bench/compare_hf.py feeds the token counts
// of the seeds' prompt sets through it).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

using nlohmann::json;
namespace fs = std::filesystem;

namespace {

std::string model() { return std::string(LL_SOURCE_DIR) + "/tests/fixtures/models/llama"; }

fs::path tmp_file(const char* name) {
  return fs::temp_directory_path() / (std::string("ll_bench_") + std::to_string(getpid()) + "_" + name);
}

int run(const std::string& args) {
  const std::string cmd = std::string("'") + LL_CLI_PATH + "' bench -q --device cpu -t 1 -m '" + model() +
                          "' " + args + " >/dev/null 2>&1";
  const int rc = std::system(cmd.c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

}  // namespace

TEST(CliBench, PromptLensPerRequest) {
  const fs::path out = tmp_file("lens.json");
  ASSERT_EQ(run("--batch 3 --prompt-lens 2,5 --gen-len 3 --runs 1 --warmup 0 --json '" + out.string() + "'"), 0);
  json j = json::parse(std::ifstream(out));
  fs::remove(out);
  EXPECT_EQ(j["prompt_lens"], json({2, 5}));
  EXPECT_EQ(j["prompt_len"], 5);  // the longest
  EXPECT_EQ(j["gen_len"], 3);
  ASSERT_EQ(j["results"].size(), 1u);
  const json& r = j["results"][0];
  EXPECT_EQ(r["batch"], 3);
  for (const char* k : {"total_ms", "ttft_ms", "prefill_tokens_per_s", "decode_tokens_per_s", "step_ms"})
    EXPECT_GT(r[k]["median"].get<double>(), 0.0) << k;
}

TEST(CliBench, SinglePromptLength) {
  const fs::path out = tmp_file("one.json");
  ASSERT_EQ(run("--batch 1,2 --prompt-len 4 --gen-len 2 --runs 1 --warmup 0 --json '" + out.string() + "'"), 0);
  json j = json::parse(std::ifstream(out));
  fs::remove(out);
  EXPECT_EQ(j["prompt_lens"], json({4}));
  EXPECT_EQ(j["prompt_len"], 4);
  ASSERT_EQ(j["results"].size(), 2u);
  EXPECT_EQ(j["results"][1]["batch"], 2);
}

TEST(CliBench, BadListsExitWithCode2) {
  EXPECT_EQ(run("--prompt-lens 3,x --gen-len 2 --runs 1"), 2);
  EXPECT_EQ(run("--prompt-lens 3,0 --gen-len 2 --runs 1"), 2);
  EXPECT_EQ(run("--prompt-lens 4a --gen-len 2 --runs 1"), 2);
  EXPECT_EQ(run("--batch 1,,x --gen-len 2 --runs 1"), 2);
}

TEST(CliBench, QuantizeFlagOnCpu) {
  // int8/int4/fp8 storage is a CUDA feature: on the CPU one line says so (exit 2, as every
  // load error); an unknown scheme is rejected by the option parser (exit 2); auto / none run.
  const fs::path err = tmp_file("quant_err.txt");
  const std::string cmd = std::string("'") + LL_CLI_PATH + "' bench -q --device cpu -t 1 -m '" + model() +
                          "' --quantize int4 --gen-len 2 --runs 1 --warmup 0 >/dev/null 2>'" + err.string() + "'";
  const int rc = std::system(cmd.c_str());
  ASSERT_TRUE(WIFEXITED(rc));
  EXPECT_EQ(WEXITSTATUS(rc), 2);
  std::ifstream f(err);
  std::string text((std::istreambuf_iterator<char>(f)), {});
  EXPECT_NE(text.find("--quantize int4 needs the CUDA backend"), std::string::npos) << text;
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 1) << text;
  fs::remove(err);
  EXPECT_EQ(run("--quantize int3 --gen-len 2 --runs 1"), 2);
  EXPECT_EQ(run("--quantize none --gen-len 2 --runs 1 --warmup 0"), 0);
  EXPECT_EQ(run("--quantize auto --gen-len 2 --runs 1 --warmup 0"), 0);
}

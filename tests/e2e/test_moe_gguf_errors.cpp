// Broken qwen3moe GGUF files, patched from the committed Q8_0 fixture
// (tests/fixtures/models/qwen3-moe-q8_0): each must fail at load with one error naming the key
// or tensor at fault, and the CLI must print it as one line and exit 2.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "lite_llama/engine.h"

namespace fs = std::filesystem;
using namespace lite_llama;

namespace {

std::string fixture() {
  std::ifstream in(std::string(LL_SOURCE_DIR) + "/tests/fixtures/models/qwen3-moe-q8_0/qwen3-moe-Q8_0.gguf",
                   std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Offset just past the metadata key `key` (its length-prefixed string), where the value's type
// id (u32) and then the value follow.
size_t after_key(const std::string& f, const std::string& key) {
  uint64_t n = key.size();
  const std::string needle = std::string(reinterpret_cast<const char*>(&n), 8) + key;
  const size_t at = f.find(needle);
  if (at == std::string::npos) throw std::runtime_error("key not in fixture: " + key);
  return at + needle.size();
}

void set_u32(std::string& f, const std::string& key, uint32_t v) {
  const size_t at = after_key(f, key);
  uint32_t type;
  std::memcpy(&type, f.data() + at, 4);
  ASSERT_EQ(type, 4u) << key << " is not a u32";  // GGUF value type 4: UINT32
  std::memcpy(f.data() + at + 4, &v, 4);
}

class MoeGgufErrors : public ::testing::Test {
 protected:
  void expect_error(const std::string& bytes, const std::vector<std::string>& needles) {
    const fs::path p = fs::temp_directory_path() /
                       ("ll_moe_gguf_" + std::to_string(getpid()) + "_" +
                        ::testing::UnitTest::GetInstance()->current_test_info()->name() + ".gguf");
    std::ofstream(p, std::ios::binary).write(bytes.data(), std::streamsize(bytes.size()));
    EngineOptions o;
    o.model = p.string();
    o.backend.device = DeviceKind::Cpu;
    o.kv_tokens = 16;
    o.ctx = 16;
    try {
      Engine::create(o);
      ADD_FAILURE() << "loaded without error";
    } catch (const Error& e) {
      for (const std::string& n : needles)
        EXPECT_NE(std::string(e.what()).find(n), std::string::npos) << "lacks '" << n << "': " << e.what();
    }
    const fs::path err = p.string() + ".err";
    const std::string cmd = std::string("'") + LL_CLI_PATH + "' info -q --device cpu -m '" + p.string() +
                            "' >/dev/null 2>'" + err.string() + "'";
    const int rc = std::system(cmd.c_str());
    ASSERT_TRUE(WIFEXITED(rc));
    EXPECT_EQ(WEXITSTATUS(rc), 2);
    std::ifstream in(err);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_EQ(text.find('\n'), text.size() - 1) << "not one line: " << text;
    for (const std::string& n : needles) EXPECT_NE(text.find(n), std::string::npos) << text;
    fs::remove(p);
    fs::remove(err);
  }
};

TEST_F(MoeGgufErrors, ExpertCountDisagreesWithTheTensors) {
  std::string f = fixture();
  set_u32(f, "qwen3moe.expert_count", 9);
  expect_error(f, {"blk.0.ffn_gate_inp.weight", "expected [9, 64]"});
}

TEST_F(MoeGgufErrors, MoreExpertsUsedThanThereAre) {
  std::string f = fixture();
  set_u32(f, "qwen3moe.expert_used_count", 12);
  expect_error(f, {"num_experts_per_tok 12"});
}

TEST_F(MoeGgufErrors, ExpertFfnDisagreesWithTheTensors) {
  std::string f = fixture();
  set_u32(f, "qwen3moe.expert_feed_forward_length", 64);
  expect_error(f, {"blk.0.ffn_gate_exps.weight (expert 0)", "expected [64, 64]"});
}

TEST_F(MoeGgufErrors, MissingExpertCount) {
  std::string f = fixture();
  const size_t at = after_key(f, "qwen3moe.expert_count");
  f[at - 1] = 'X';  // renames the key
  expect_error(f, {"qwen3moe.expert_count"});
}

}  // namespace

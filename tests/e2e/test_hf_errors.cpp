// Broken Hugging Face model directories, built in a temporary folder from the committed tiny
// fixtures (tests/fixtures/models/): each must fail with a lite_llama::Error naming the file,
// field or tensor at fault, and the CLI must turn it into one line on stderr and exit code 2.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "lite_llama/engine.h"

namespace fs = std::filesystem;
using namespace lite_llama;
using nlohmann::json;

namespace {

std::string read_all(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write_all(const fs::path& p, const std::string& s) {
  std::ofstream(p, std::ios::binary | std::ios::trunc).write(s.data(), std::streamsize(s.size()));
}

// A safetensors file as tensors; written back with fresh offsets (u64 LE header length, JSON
// header, data), so entries can be dropped, retyped or reshaped.
struct StTensor {
  std::string dtype;
  std::vector<int64_t> shape;
  std::string bytes;
};
using StFile = std::map<std::string, StTensor>;

StFile read_st(const fs::path& p) {
  const std::string s = read_all(p);
  uint64_t hlen = 0;
  std::memcpy(&hlen, s.data(), 8);
  const json h = json::parse(s.substr(8, hlen));
  StFile f;
  for (auto it = h.begin(); it != h.end(); ++it) {
    if (it.key() == "__metadata__") continue;
    const auto off = it.value()["data_offsets"].get<std::vector<uint64_t>>();
    f[it.key()] = {it.value()["dtype"], it.value()["shape"].get<std::vector<int64_t>>(),
                   s.substr(8 + hlen + off[0], off[1] - off[0])};
  }
  return f;
}

void write_st(const fs::path& p, const StFile& f) {
  json h = {{"__metadata__", {{"format", "pt"}}}};
  std::string data;
  for (const auto& [name, t] : f) {
    h[name] = {{"dtype", t.dtype},
               {"shape", t.shape},
               {"data_offsets", {data.size(), data.size() + t.bytes.size()}}};
    data += t.bytes;
  }
  std::string hs = h.dump();
  hs.resize((hs.size() + 7) / 8 * 8, ' ');
  const uint64_t n = hs.size();
  write_all(p, std::string(reinterpret_cast<const char*>(&n), 8) + hs + data);
}

class HfErrors : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            ("ll_hf_errors_" + std::to_string(getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  void TearDown() override { fs::remove_all(root_); }

  // A copy of a committed fixture model to break.
  fs::path copy_fixture(const std::string& name) {
    const fs::path d = root_ / name;
    fs::copy(fs::path(LL_SOURCE_DIR) / "tests/fixtures/models" / name, d,
             fs::copy_options::recursive);
    return d;
  }
  void edit_config(const fs::path& d, const std::function<void(json&)>& f) {
    json c = json::parse(read_all(d / "config.json"));
    f(c);
    write_all(d / "config.json", c.dump(2));
  }

  // Loads through the public API and the CLI; both must report every `needles` string.
  void expect_error(const fs::path& d, const std::vector<std::string>& needles) {
    EngineOptions o;
    o.model = d.string();
    o.backend.device = DeviceKind::Cpu;
    o.kv_tokens = 16;
    o.ctx = 16;
    try {
      Engine::create(o);
      ADD_FAILURE() << "loaded without error: " << d;
    } catch (const Error& e) {
      for (const std::string& n : needles)
        EXPECT_NE(std::string(e.what()).find(n), std::string::npos)
            << "message lacks '" << n << "': " << e.what();
    }
    // -q: errors only, so the missing-tokenizer warning does not count as a line.
    const fs::path err = root_ / "stderr.txt";
    const std::string cmd = std::string("'") + LL_CLI_PATH + "' info -q --device cpu -m '" +
                            d.string() + "' >/dev/null 2>'" + err.string() + "'";
    const int rc = std::system(cmd.c_str());
    ASSERT_TRUE(WIFEXITED(rc)) << cmd;
    EXPECT_EQ(WEXITSTATUS(rc), 2) << cmd;
    const std::string text = read_all(err);
    std::printf("  cli: %s", text.c_str());
    EXPECT_EQ(text.rfind("error: ", 0), 0u) << text;
    ASSERT_FALSE(text.empty());
    EXPECT_EQ(text.find('\n'), text.size() - 1) << "not one line: " << text;
    for (const std::string& n : needles)
      EXPECT_NE(text.find(n), std::string::npos) << "stderr lacks '" << n << "': " << text;
  }

  fs::path root_;
};

TEST_F(HfErrors, MissingConfigJson) {
  const fs::path d = copy_fixture("qwen2");
  fs::remove(d / "config.json");
  expect_error(d, {"config.json", d.string()});
}

TEST_F(HfErrors, MalformedConfigJson) {
  const fs::path d = copy_fixture("qwen2");
  write_all(d / "config.json", R"({"architectures": ["Qwen2ForCausalLM"], "hidden_size": )");
  expect_error(d, {"config.json", "not a JSON object"});
}

TEST_F(HfErrors, UnknownArchitecture) {
  const fs::path d = copy_fixture("qwen2");
  edit_config(d, [](json& c) { c["architectures"] = {"GPT2LMHeadModel"}; });
  expect_error(d, {"config.json", "GPT2LMHeadModel"});
}

TEST_F(HfErrors, UnsupportedRopeScalingYarn) {
  const fs::path d = copy_fixture("llama");  // transformers 5 layout: rope_parameters
  edit_config(d, [](json& c) { c["rope_parameters"]["rope_type"] = "yarn"; });
  expect_error(d, {"config.json", "yarn"});
}

TEST_F(HfErrors, UnsupportedRopeScalingDynamic) {
  const fs::path d = copy_fixture("llama-linear");  // transformers 4 layout: rope_scaling
  edit_config(d, [](json& c) { c["rope_scaling"] = {{"type", "dynamic"}, {"factor", 2.0}}; });
  expect_error(d, {"config.json", "dynamic"});
}

// String fields of another type: one error naming the file and the field, not nlohmann's
// "[json.exception.type_error.302] type must be string, but is number".
TEST_F(HfErrors, NonStringHiddenAct) {
  const fs::path d = copy_fixture("qwen2");
  edit_config(d, [](json& c) { c["hidden_act"] = 5; });
  expect_error(d, {"config.json", "hidden_act", "must be a string"});
}

TEST_F(HfErrors, NonStringNameOrPath) {
  const fs::path d = copy_fixture("qwen2");
  edit_config(d, [](json& c) { c["_name_or_path"] = json::array(); });
  expect_error(d, {"config.json", "_name_or_path", "must be a string"});
}

TEST_F(HfErrors, NonStringRopeType) {
  const fs::path d = copy_fixture("llama");
  edit_config(d, [](json& c) { c["rope_parameters"]["rope_type"] = 3; });
  expect_error(d, {"config.json", "rope_type", "must be a string"});
  const fs::path l = copy_fixture("llama-linear");
  edit_config(l, [](json& c) { c["rope_scaling"]["type"] = true; });
  expect_error(l, {"config.json", "type", "must be a string"});
}

TEST_F(HfErrors, MissingTensor) {
  const fs::path d = copy_fixture("qwen2");
  StFile f = read_st(d / "model.safetensors");
  ASSERT_EQ(f.erase("model.layers.1.self_attn.k_proj.bias"), 1u);
  write_st(d / "model.safetensors", f);
  expect_error(d, {"missing tensor", "model.layers.1.self_attn.k_proj.bias"});
}

TEST_F(HfErrors, MisshapedTensor) {
  const fs::path d = copy_fixture("qwen2");
  StFile f = read_st(d / "model.safetensors");
  StTensor& t = f.at("model.layers.0.mlp.up_proj.weight");
  std::swap(t.shape[0], t.shape[1]);  // same bytes, transposed shape
  write_st(d / "model.safetensors", f);
  expect_error(d, {"model.layers.0.mlp.up_proj.weight", "shape"});
}

TEST_F(HfErrors, F64Weight) {
  const fs::path d = copy_fixture("qwen2");
  StFile f = read_st(d / "model.safetensors");
  StTensor& t = f.at("model.layers.0.self_attn.q_proj.weight");
  std::string wide;
  for (size_t i = 0; i < t.bytes.size(); i += 4) {
    float v;
    std::memcpy(&v, t.bytes.data() + i, 4);
    const double w = v;
    wide.append(reinterpret_cast<const char*>(&w), 8);
  }
  t.dtype = "F64", t.bytes = wide;
  write_st(d / "model.safetensors", f);
  expect_error(d, {"model.layers.0.self_attn.q_proj.weight", "F64"});
}

TEST_F(HfErrors, I8NormWeight) {
  const fs::path d = copy_fixture("qwen2");
  StFile f = read_st(d / "model.safetensors");
  StTensor& t = f.at("model.norm.weight");
  t.dtype = "I8", t.bytes = std::string(t.bytes.size() / 4, '\1');
  write_st(d / "model.safetensors", f);
  expect_error(d, {"model.norm.weight", "I8"});
}

namespace {
// The qwen2 fixture with layer 1's down_proj stored as a 1-byte `dtype` (its bytes truncated).
fs::path with_one_byte_down_proj_in(const fs::path& d, const char* dtype) {
  StFile f = read_st(d / "model.safetensors");
  StTensor& t = f.at("model.layers.1.mlp.down_proj.weight");
  t.dtype = dtype, t.bytes.resize(t.bytes.size() / 4);
  write_st(d / "model.safetensors", f);
  return d;
}
}  // namespace

TEST_F(HfErrors, UnknownDtypeString) {
  expect_error(with_one_byte_down_proj_in(copy_fixture("qwen2"), "F8_E5M2"), {"model.safetensors", "model.layers.1.mlp.down_proj.weight", "F8_E5M2"});
}

TEST_F(HfErrors, Fp8WeightWithoutQuantizationConfig) {
  // F8_E4M3 is read (FP8 checkpoints), but without quantization_config there is no scale.
  expect_error(with_one_byte_down_proj_in(copy_fixture("qwen2"), "F8_E4M3"), {"model.layers.1.mlp.down_proj.weight", "F8_E4M3", "quantization_config"});
}

TEST_F(HfErrors, MissingShard) {
  const fs::path d = copy_fixture("qwen3");
  ASSERT_TRUE(fs::remove(d / "model-00002-of-00003.safetensors"));
  expect_error(d, {"model-00002-of-00003.safetensors", "missing"});
}

TEST_F(HfErrors, TruncatedSafetensors) {
  const fs::path d = copy_fixture("qwen2");
  const std::string s = read_all(d / "model.safetensors");
  write_all(d / "model.safetensors", s.substr(0, s.size() - 1000));
  expect_error(d, {"model.safetensors", "file size"});
}

TEST_F(HfErrors, HeaderLongerThanFile) {
  const fs::path d = copy_fixture("qwen3");
  const fs::path shard = d / "model-00003-of-00003.safetensors";
  std::string s = read_all(shard);
  const uint64_t too_long = s.size() + 100;
  std::memcpy(s.data(), &too_long, 8);
  write_all(shard, s);
  expect_error(d, {"model-00003-of-00003.safetensors", "header size"});
}

// Two tensors of one size pointed at the same bytes (the format lays them out back to back):
// the loader must refuse, not let one read the other's weights.
TEST_F(HfErrors, OverlappingTensors) {
  const fs::path d = copy_fixture("qwen2");
  const std::string s = read_all(d / "model.safetensors");
  uint64_t hlen = 0;
  std::memcpy(&hlen, s.data(), 8);
  json h = json::parse(s.substr(8, hlen));
  std::string first;
  for (auto it = h.begin(); it != h.end() && first.empty(); ++it)
    if (it.key().find("k_proj.weight") != std::string::npos) first = it.key();
  ASSERT_FALSE(first.empty());
  const std::string second = std::string(first).replace(first.find("k_proj"), 6, "v_proj");
  ASSERT_TRUE(h.contains(second));
  ASSERT_EQ(h[first]["shape"], h[second]["shape"]);
  h[second]["data_offsets"] = h[first]["data_offsets"];
  std::string hs = h.dump();
  hs.resize((hs.size() + 7) / 8 * 8, ' ');
  const uint64_t n = hs.size();
  write_all(d / "model.safetensors", std::string(reinterpret_cast<const char*>(&n), 8) + hs + s.substr(8 + hlen));
  expect_error(d, {"model.safetensors", "overlap"});
}

// The rewriting itself is sound: an unmodified round trip still loads.
TEST_F(HfErrors, RoundTripOfTheWriterLoads) {
  const fs::path d = copy_fixture("qwen2");
  write_st(d / "model.safetensors", read_st(d / "model.safetensors"));
  EngineOptions o;
  o.model = d.string();
  o.backend.device = DeviceKind::Cpu;
  o.kv_tokens = 16;
  o.ctx = 16;
  EXPECT_NO_THROW(Engine::create(o));
}

// HF Llama with attention_bias=true adds a bias to o_proj as well as to q/k/v. With layer 0's
// o_proj weight zero, its attention adds exactly o_proj.bias b to the residual: the same model
// as one without biases whose embedding rows are shifted by b (HF semantics, checked on logits).
TEST_F(HfErrors, LlamaAttentionBiasIncludesOProj) {
  const fs::path src = copy_fixture("llama");
  StFile all;
  for (const auto& e : fs::directory_iterator(src))
    if (e.path().extension() == ".safetensors") all.merge(read_st(e.path()));
  auto f32 = [](const std::vector<float>& v) {
    return std::string(reinterpret_cast<const char*>(v.data()), v.size() * 4);
  };
  const int64_t H = 128, V = 1000;
  std::vector<float> b(static_cast<size_t>(H));
  for (int64_t i = 0; i < H; ++i) b[size_t(i)] = 0.25f * float(i % 7) - 0.75f;
  // Embedding to F32 (bf16 widens exactly) so that rows + b are exact in both models.
  const StTensor& emb = all.at("model.embed_tokens.weight");
  ASSERT_EQ(emb.dtype, "BF16");
  std::vector<float> rows(static_cast<size_t>(V * H)), shifted(rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    uint16_t h;
    std::memcpy(&h, emb.bytes.data() + 2 * i, 2);
    const uint32_t bits = uint32_t(h) << 16;
    std::memcpy(&rows[i], &bits, 4);
    shifted[i] = rows[i] + b[i % size_t(H)];
  }
  StTensor& o0 = all.at("model.layers.0.self_attn.o_proj.weight");
  o0.bytes.assign(o0.bytes.size(), '\0');

  auto write_model = [&](const std::string& name, const StFile& f, bool attention_bias) {
    const fs::path d = root_ / name;
    fs::create_directories(d);
    fs::copy_file(src / "config.json", d / "config.json");
    edit_config(d, [&](json& c) { c["attention_bias"] = attention_bias; });
    write_st(d / "model.safetensors", f);
    return d;
  };
  StFile ref = all, biased = all;
  ref.at("model.embed_tokens.weight") = {"F32", {V, H}, f32(shifted)};
  biased.at("model.embed_tokens.weight") = {"F32", {V, H}, f32(rows)};
  for (int l = 0; l < 3; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".self_attn.";
    biased[p + "q_proj.bias"] = {"F32", {128}, f32(std::vector<float>(128, 0.f))};
    biased[p + "k_proj.bias"] = {"F32", {32}, f32(std::vector<float>(32, 0.f))};
    biased[p + "v_proj.bias"] = {"F32", {32}, f32(std::vector<float>(32, 0.f))};
    biased[p + "o_proj.bias"] = {"F32", {H}, f32(l == 0 ? b : std::vector<float>(b.size(), 0.f))};
  }
  const fs::path d_ref = write_model("ref", ref, false), d_bias = write_model("bias", biased, true);

  auto logits = [](const fs::path& d) {
    EngineOptions o;
    o.model = d.string();
    o.backend.device = DeviceKind::Cpu;
    o.backend.cpu.int16_activations = false;
    o.kv_tokens = 16;
    o.ctx = 16;
    std::vector<float> out;
    Engine::create(o)->score({{3, 141, 59, 265, 358, 979}}, 0,
                             [&](int, int, const float* l, int64_t n) { out.insert(out.end(), l, l + n); });
    return out;
  };
  const std::vector<float> want = logits(d_ref), got = logits(d_bias);
  ASSERT_EQ(got.size(), want.size());
  ASSERT_EQ(want.size(), size_t(5 * V));
  double max_diff = 0;
  for (size_t i = 0; i < want.size(); ++i) max_diff = std::max(max_diff, std::fabs(double(got[i]) - want[i]));
  EXPECT_LE(max_diff, 1e-4);
}

}  // namespace

// Qwen3-MoE: inconsistent routing fields and broken expert tensors (per-expert and fused).
TEST_F(HfErrors, MoeTopKOverExperts) {
  const fs::path d = copy_fixture("qwen3-moe-mixed");
  edit_config(d, [](json& c) { c["num_experts_per_tok"] = 5; });
  expect_error(d, {"config.json", "num_experts_per_tok 5"});
}

TEST_F(HfErrors, MoeMlpOnlyLayerOutOfRange) {
  const fs::path d = copy_fixture("qwen3-moe-mixed");
  edit_config(d, [](json& c) { c["mlp_only_layers"] = {1, 7}; });
  expect_error(d, {"config.json", "mlp_only_layers entry 7"});
}

TEST_F(HfErrors, MoeMissingExpertTensor) {
  const fs::path d = copy_fixture("qwen3-moe");
  const fs::path shard = d / "model-00002-of-00002.safetensors";
  StFile f = read_st(shard);
  std::string gone;
  for (const auto& [name, t] : f)
    if (name.find(".mlp.experts.5.up_proj.weight") != std::string::npos) gone = name;
  ASSERT_FALSE(gone.empty());
  f.erase(gone);
  write_st(shard, f);
  json idx = json::parse(read_all(d / "model.safetensors.index.json"));
  idx["weight_map"].erase(gone);
  write_all(d / "model.safetensors.index.json", idx.dump());
  expect_error(d, {"missing tensor", gone});
}

TEST_F(HfErrors, MoeMisshapedFusedExperts) {
  const fs::path d = copy_fixture("qwen3-moe-mixed");
  StFile f = read_st(d / "model.safetensors");
  StTensor& t = f.at("model.layers.2.mlp.experts.down_proj");
  std::swap(t.shape[1], t.shape[2]);
  write_st(d / "model.safetensors", f);
  expect_error(d, {"model.layers.2.mlp.experts.down_proj (expert 0)", "shape"});
}

// GPTQ / AWQ / FP8 checkpoints (tests/fixtures/quant_checkpoints, written by
// scripts/fixtures/make_quant_checkpoint_fixtures.py in the libraries' packed layouts): the
// loaders' weights against numpy's independent unpacking of the same tensors, the CPU engine's
// logits against the unquantised reference model, and one-line errors for malformed configs and
// packed shapes.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "common/test_text.h"
#include "core/error.h"
#include "core/quant.h"
#include "io/safetensors.h"
#include "lite_llama/engine.h"
#include "model/model_config.h"
#include "model/weights.h"

using namespace lite_llama;
namespace fs = std::filesystem;

namespace {

const std::string kDir = std::string(LL_SOURCE_DIR) + "/tests/fixtures/quant_checkpoints/";

struct Variant {
  const char* name;
  const char* method;
  DType want;   // the dtype the loader gives a projection
  double tol;   // max |w - ref| / max |ref| per tensor
};

// GQ params are fp16: offsets -s z round to 2^-11 relative (a few 1e-4 of the row's range);
// act-order GPTQ is dequantised to BF16 (2^-9 relative).
const Variant kVariants[] = {
    {"gptq-g32", "gptq", DType::GQ4_G32, 1e-3},     {"gptq-actorder", "gptq", DType::BF16, 4e-3},
    {"gptq-v2-channel", "gptq", DType::GQ4, 1e-3},  {"awq-g32", "awq", DType::GQ4_G32, 1e-3},
    {"fp8-block", "fp8", DType::GF8_G128, 1e-3},    {"fp8-channel", "fp8", DType::GF8, 1e-3},
};

const WeightRole kRoles[] = {WeightRole::Q, WeightRole::K, WeightRole::V, WeightRole::O,
                             WeightRole::Gate, WeightRole::Up, WeightRole::Down};

std::vector<float> rows_f32(const Tensor& t) {
  std::vector<float> f(static_cast<size_t>(t.numel()));
  for (int64_t r = 0; r < t.rows(); ++r) dequantize_row(t.dtype, t.row(r), f.data() + r * t.cols(), t.cols());
  return f;
}

}  // namespace

TEST(QuantCheckpoints, WeightsMatchIndependentUnpacking) {
  for (const Variant& v : kVariants) {
    SCOPED_TRACE(v.name);
    const ModelConfig c = config_from_hf_json(kDir + v.name + "/config.json");
    EXPECT_EQ(c.quant.method, v.method);
    auto archive = std::shared_ptr<const safetensors::Archive>(safetensors::Archive::open_dir(kDir + v.name));
    auto src = hf_weight_source(archive, c.quant);
    auto ref = safetensors::Archive::open_dir(kDir + v.name + "/reference");
    for (WeightRole role : kRoles) {
      const std::string name = hf_tensor_name(role, 0);
      SCOPED_TRACE(name);
      const Tensor* t = src->find(role, 0);
      ASSERT_NE(t, nullptr);
      EXPECT_EQ(t->dtype, v.want) << dtype_name(t->dtype);
      const safetensors::TensorEntry* r = ref->find(name);
      ASSERT_NE(r, nullptr);
      ASSERT_EQ(t->rows(), r->view.rows());
      ASSERT_EQ(t->cols(), r->view.cols());
      const std::vector<float> got = rows_f32(*t), want = rows_f32(r->view);
      double amax = 0, err = 0;
      for (size_t i = 0; i < want.size(); ++i) {
        amax = std::max(amax, double(std::fabs(want[i])));
        err = std::max(err, double(std::fabs(got[i] - want[i])));
      }
      EXPECT_LE(err, v.tol * amax) << "max |w - ref| " << err << " of max |ref| " << amax;
      EXPECT_GT(amax, 0);
    }
  }
}

namespace {

// Logits of the quantised model against the reference model on one device. The CPU computes
// with a BF16 copy of GQ weights, CUDA with the GQ layout itself (fp16 dequantisation, int8
// activations in decode GEMVs): either moves the logits by well under 1% (rel-L2), far below
// what one wrong code, scale or zero point does to a 1-layer model.
void check_logits(const std::string& device) {
  const std::vector<int32_t> ids = {1, 5, 9, 33, 2, 60, 17, 8, 44, 3};
  for (const Variant& v : kVariants) {
    SCOPED_TRACE(v.name);
    auto logits = [&](const std::string& dir) {
      EngineOptions o;
      o.model = dir;
      o.backend.device = parse_device(device);
      o.backend.threads = 2;
      auto e = Engine::create(o);
      std::vector<float> all;
      e->score({ids}, 4, [&](int, int, const float* l, int64_t n) { all.insert(all.end(), l, l + n); });
      return all;
    };
    const std::vector<float> q = logits(kDir + v.name), r = logits(kDir + v.name + "/reference");
    ASSERT_EQ(q.size(), r.size());
    ASSERT_FALSE(q.empty());
    double num = 0, den = 0;
    for (size_t i = 0; i < q.size(); ++i) num += double(q[i] - r[i]) * (q[i] - r[i]), den += double(r[i]) * r[i];
    EXPECT_LT(std::sqrt(num / den), 1e-2);
  }
}

}  // namespace

TEST(QuantCheckpoints, CpuLogitsMatchReferenceModel) { check_logits("cpu"); }

TEST(QuantCheckpoints, CudaLogitsMatchReferenceModel) {
  try {
    EngineOptions o;
    o.model = kDir + "gptq-g32";
    o.backend.device = DeviceKind::Cuda;
    Engine::create(o);
  } catch (const Error& e) {
    const std::string msg = e.what();
    if (msg.find("no CUDA") != std::string::npos) GTEST_SKIP() << msg;  // CI: no GPU / no CUDA build
    FAIL() << msg;
  }
  check_logits("cuda");
}

TEST(QuantCheckpoints, BadConfigsAndShapesFailWithOneLine) {
  lite_llama::testing::TempDir dir;
  auto with_config = [&](const std::string& qcfg) {
    std::ifstream in(kDir + "gptq-g32/config.json");
    std::string cfg((std::istreambuf_iterator<char>(in)), {});
    const size_t at = cfg.find("\"quantization_config\"");
    cfg = cfg.substr(0, at) + "\"quantization_config\": " + qcfg + "}";
    dir.write("config.json", cfg);
    fs::copy_file(kDir + "gptq-g32/model.safetensors", dir.path() / "model.safetensors",
                  fs::copy_options::overwrite_existing);
  };
  auto fails_with = [&](const std::string& qcfg, const std::string& needle) {
    with_config(qcfg);
    try {
      EngineOptions o;
      o.model = dir.str();
      o.backend.device = DeviceKind::Cpu;
      Engine::create(o);
      ADD_FAILURE() << "no error for " << qcfg;
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find(needle), std::string::npos) << msg;
      EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    }
  };
  fails_with(R"({"quant_method": "bitsandbytes"})", "quantization method 'bitsandbytes' is not supported");
  fails_with(R"({"quant_method": "gptq", "bits": 8, "group_size": 32})", "GPTQ with 8 bits");
  fails_with(R"({"quant_method": "gptq", "bits": 4, "group_size": 48})", "group_size 48");
  fails_with(R"({"quant_method": "awq", "bits": 4, "group_size": 32, "version": "gemv"})", "AWQ version 'gemv'");
  fails_with(R"({"quant_method": "fp8", "weight_block_size": [64, 64]})", "weight_block_size");
  // Group 64 against qzeros written for group 32: the packed shapes disagree.
  fails_with(R"({"quant_method": "gptq", "bits": 4, "group_size": 64})", "qzeros' has shape");
  // Declared FP8 but the tensors are GPTQ's.
  fails_with(R"({"quant_method": "fp8"})", "no quantised tensors were found");
}

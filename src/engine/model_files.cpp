#include "engine/model_files.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>

#include "core/error.h"
#include "engine/dummy_tokenizer.h"
#include "io/gguf.h"

namespace fs = std::filesystem;

namespace lite_llama {
namespace {

constexpr const char* kDefaultModelFile = "SmolLM2-135M-Instruct.Q4_1.gguf";

fs::path exe_dir() {
  std::error_code ec;
  fs::path p = fs::read_symlink("/proc/self/exe", ec);
  return ec ? fs::path() : p.parent_path();
}

std::string most_common_weight_type(const gguf::File& f) {
  std::map<std::string, size_t> bytes;
  for (const auto& t : f.tensors())
    if (t.ne.size() >= 2) bytes[std::string(dtype_name(t.type))] += t.nbytes;  // matrices, stacked experts
  std::string best;
  size_t most = 0;
  for (const auto& [k, v] : bytes)
    if (v > most) best = k, most = v;
  return best;
}

ModelFiles open_gguf(const std::string& path) {
  ModelFiles m;
  m.path = path;
  m.format = "gguf";
  auto f = std::shared_ptr<const gguf::File>(gguf::File::open(path));
  m.config = config_from_gguf(*f);
  m.tokenizer = Tokenizer::from_gguf(*f);
  LL_CHECK(m.tokenizer->vocab_size() <= m.config.vocab_size,
           "{}: tokenizer has {} tokens but the model only {} embeddings", path,
           m.tokenizer->vocab_size(), m.config.vocab_size);
  m.chat_template = f->get_string("tokenizer.chat_template", "");
  if (m.tokenizer->bos_id() >= 0) m.bos_token = m.tokenizer->token_text(m.tokenizer->bos_id());
  if (m.tokenizer->eos_id() >= 0) m.eos_token = m.tokenizer->token_text(m.tokenizer->eos_id());
  m.weight_dtype = most_common_weight_type(*f);
  m.weights = gguf_weight_source(f);
  m.gguf = std::move(f);
  return m;
}

}  // namespace

std::string resolve_model_path(const std::string& model) {
  LL_CHECK(!model.empty(), "no model given (-m PATH or -m default)");
  if (model != "default") {
    LL_CHECK(fs::exists(model), "model '{}' not found", model);
    return model;
  }
  std::vector<fs::path> dirs;
  if (const char* env = std::getenv("LITE_LLAMA_MODELS")) dirs.emplace_back(env);
  dirs.emplace_back(fs::current_path() / "models");
  fs::path exe = exe_dir();
  if (!exe.empty()) {
    dirs.push_back(exe / "../models");
    dirs.push_back(exe / "../../models");           // build/bin -> repo root
    dirs.push_back(exe / "../share/lite-llama/models");  // installed
  }
  for (const fs::path& d : dirs) {
    std::error_code ec;
    if (fs::exists(d / kDefaultModelFile, ec)) return fs::weakly_canonical(d / kDefaultModelFile).string();
  }
  fail("default model {} not found in ./models or next to the binary: run scripts/fetch-model "
       "(or set LITE_LLAMA_MODELS to its folder)",
       kDefaultModelFile);
}

ModelFiles open_hf_dir(const std::string& path);  // model_files_hf.cpp
// The HF tokenizer (and chat template) of dir into m; false where dir has no tokenizer.json.
bool attach_hf_tokenizer(ModelFiles& m, const std::string& dir);

ModelFiles open_dummy_model(const std::string& model, uint64_t seed) {
  fs::path p(model);
  if (fs::is_directory(p)) p /= "config.json";
  LL_CHECK(fs::exists(p), "--load-format dummy needs a config.json: '{}' not found", p.string());
  {
    char magic[4] = {};
    std::ifstream(p, std::ios::binary).read(magic, 4);
    LL_CHECK(std::string(magic, 4) != "GGUF",
             "--load-format dummy needs a config.json (random weights of an HF model's shapes), not a GGUF file: '{}'",
             p.string());
  }
  ModelFiles m;
  m.path = p.string();
  m.format = "dummy";
  m.weight_dtype = "BF16 (random)";
  m.config = config_from_hf_json(p.string());
  m.weights = dummy_weight_source(m.config, seed);
  // Tokenizer files beside the config give random weights real text in and out (chat template
  // included), e.g. for serving benchmarks; otherwise token ids only.
  if (!attach_hf_tokenizer(m, p.parent_path().string()))
    m.tokenizer = std::make_unique<DummyTokenizer>(int32_t(m.config.vocab_size));
  return m;
}

ModelFiles open_model_files(const std::string& model) {
  const std::string path = resolve_model_path(model);
  if (fs::is_directory(path)) return open_hf_dir(path);
  return open_gguf(path);
}

}  // namespace lite_llama

// Hugging Face model directories: config.json, *.safetensors (sharded or not), tokenizer files.
#include <filesystem>
#include <map>

#include "core/error.h"
#include "core/log.h"
#include "engine/dummy_tokenizer.h"
#include "engine/model_files.h"
#include "io/safetensors.h"

namespace fs = std::filesystem;

namespace lite_llama {

bool attach_hf_tokenizer(ModelFiles& m, const std::string& dir) {
  if (!fs::exists(fs::path(dir) / "tokenizer.json")) return false;
  m.tokenizer = Tokenizer::from_hf_dir(dir);
  LL_CHECK(m.tokenizer->vocab_size() <= m.config.vocab_size,
           "{}: tokenizer has {} tokens but the model only {} embeddings", dir,
           m.tokenizer->vocab_size(), m.config.vocab_size);
  m.chat_template = m.tokenizer->chat_template();
  m.bos_token = m.tokenizer->bos_token();
  m.eos_token = m.tokenizer->eos_token();
  return true;
}

ModelFiles open_hf_dir(const std::string& dir) {
  ModelFiles m;
  m.path = dir;
  m.format = "hf";
  const fs::path cfg = fs::path(dir) / "config.json";
  LL_CHECK(fs::exists(cfg), "{}: missing config.json (not a Hugging Face model directory?)", dir);
  m.config = config_from_hf_json(cfg.string());
  auto archive = std::shared_ptr<const safetensors::Archive>(safetensors::Archive::open_dir(dir));
  std::map<std::string, size_t> bytes;
  for (const auto& [name, e] : archive->tensors())
    if (e.view.ndim == 2) bytes[std::string(dtype_name(e.view.dtype))] += e.view.nbytes();
  size_t most = 0;
  for (const auto& [k, v] : bytes)
    if (v > most) m.weight_dtype = k, most = v;
  m.weights = hf_weight_source(std::move(archive), m.config.quant);
  if (!m.config.quant.method.empty())
    m.weight_dtype = m.config.quant.method == "fp8"
                         ? fmt::format("FP8 e4m3{}", m.config.quant.fp8_block ? " (128x128 blocks)" : "")
                         : fmt::format("{} int{} g{}", m.config.quant.method == "gptq" ? "GPTQ" : "AWQ",
                                       m.config.quant.bits, m.config.quant.group_size);
  if (!attach_hf_tokenizer(m, dir)) {
    LL_WARN("{}: no tokenizer.json: token ids only (text output will be empty)", dir);
    m.tokenizer = std::make_unique<DummyTokenizer>(int32_t(m.config.vocab_size));
  }
  return m;
}

}  // namespace lite_llama

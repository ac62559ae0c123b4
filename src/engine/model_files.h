// Finds and opens a model's files (GGUF now; HF directories in model_files_hf.cpp) and builds
// what the engine needs besides the weights: config, tokenizer, chat template, stop ids.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "model/model_config.h"
#include "model/weights.h"
#include "tokenizer/tokenizer.h"

namespace lite_llama {

namespace gguf {
class File;
}

struct ModelFiles {
  std::string path;
  std::string format;        // "gguf" | "hf" | "dummy"
  std::string weight_dtype;  // most common weight type, e.g. "Q4_1"
  ModelConfig config;
  std::shared_ptr<const gguf::File> gguf;
  std::unique_ptr<WeightSource> weights;
  std::unique_ptr<Tokenizer> tokenizer;
  std::string chat_template;
  std::string bos_token, eos_token;
};

// "default" -> the bundled SmolLM2 GGUF (see scripts/fetch-model); errors say how to get it.
std::string resolve_model_path(const std::string& model);
ModelFiles open_model_files(const std::string& model);
// --load-format dummy: `model` is a config.json (or a directory holding one); weights are random.
ModelFiles open_dummy_model(const std::string& model, uint64_t seed);

}  // namespace lite_llama

// Engine options for a one-layer Llama of random weights (load_format "dummy", the dummy
// tokenizer), its config.json written into a temporary directory: engine-level tests that need
// no real model. Callers set what they test (max_num_seqs, grammar_warm_ms, ...).
#pragma once
#include "common/test_text.h"
#include "lite_llama/engine.h"

namespace lite_llama::testing {

inline EngineOptions tiny_dummy_options(const TempDir& dir) {
  dir.write("config.json", R"({
  "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64,
  "intermediate_size": 128, "num_attention_heads": 2, "num_key_value_heads": 1,
  "num_hidden_layers": 1, "vocab_size": 256, "max_position_embeddings": 256,
  "rms_norm_eps": 1e-6, "rope_theta": 10000.0, "tie_word_embeddings": true
})");
  EngineOptions o;
  o.model = dir.str() + "/config.json";
  o.load_format = "dummy";
  o.backend.threads = 2;
  o.ctx = 128;
  return o;
}

}  // namespace lite_llama::testing

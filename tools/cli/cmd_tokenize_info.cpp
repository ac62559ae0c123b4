// `lite-llama tokenize` and `lite-llama info`.
#include <nlohmann/json.hpp>

#include <cstdio>

#include "common.h"

namespace lite_llama::cli {
namespace {

struct TokenizeArgs {
  ModelArgs model;
  std::string text;
  bool json = false, no_special = false, parse_special = false;
};

void run_tokenize(TokenizeArgs& a) {
  a.model.engine.kv_tokens = 16;  // no generation: keep the pool tiny
  a.model.engine.max_num_seqs = 1;
  if (a.model.device == "auto") a.model.device = "cpu";
  auto engine = open_engine(a.model);
  std::vector<int32_t> ids = engine->tokenize(a.text, !a.no_special, a.parse_special);
  if (a.json) {
    nlohmann::json pieces = nlohmann::json::array();
    for (int32_t id : ids) pieces.push_back(engine->token_text(id));
    nlohmann::json j = {{"tokens", ids}, {"pieces", pieces}, {"count", ids.size()}};
    std::printf("%s\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    return;
  }
  for (int32_t id : ids) {
    nlohmann::json piece = engine->token_text(id);
    std::printf("%6d %s\n", id, piece.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  }
}

struct InfoArgs {
  ModelArgs model;
  bool json = false;
};

void run_info(InfoArgs& a) {
  // No generation: a tiny pool, and a context to match so that no "context reduced" warning
  // shows (info reports the model's own context length).
  if (a.model.engine.kv_tokens == 0) a.model.engine.kv_tokens = 16, a.model.engine.ctx = 16;
  if (a.model.engine.max_num_seqs == 0) a.model.engine.max_num_seqs = 1;
  auto engine = open_engine(a.model);
  const ModelInfo& i = engine->info();
  nlohmann::json special = nlohmann::json::object();
  for (const auto& [name, id] : i.special_tokens)
    special[name] = {{"id", id}, {"text", engine->token_text(id)}};
  nlohmann::json j = {
      {"path", i.path},
      {"name", i.name},
      {"format", i.format},
      {"architecture", i.arch},
      {"parameters", i.params},
      {"weight_dtype", i.weight_dtype},
      {"weight_bytes", i.weight_bytes},
      {"context_length", i.context_length},
      {"vocab_size", i.vocab_size},
      {"hidden_size", i.hidden_size},
      {"intermediate_size", i.intermediate_size},
      {"num_experts", i.num_experts},
      {"experts_per_token", i.experts_per_token},
      {"expert_intermediate_size", i.expert_intermediate_size},
      {"num_layers", i.num_layers},
      {"num_heads", i.num_heads},
      {"num_kv_heads", i.num_kv_heads},
      {"head_dim", i.head_dim},
      {"rope_theta", i.rope_theta},
      {"rope_scaling", i.rope_scaling},
      {"tied_embeddings", i.tied_embeddings},
      {"qkv_bias", i.qkv_bias},
      {"qk_norm", i.qk_norm},
      {"kv_bytes_per_token", i.kv_bytes_per_token},
      {"special_tokens", special},
      {"stop_token_ids", i.stop_ids},
      {"backend", i.backend},
  };
  if (a.json) {
    std::printf("%s\n", j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    return;
  }
  for (auto it = j.begin(); it != j.end(); ++it) {
    std::string v = it.value().is_string() ? it.value().get<std::string>()
                                           : it.value().dump(-1, ' ', false,
                                                             nlohmann::json::error_handler_t::replace);
    std::printf("%-20s %s\n", it.key().c_str(), v.c_str());
  }
}

}  // namespace

void register_tokenize(CLI::App& app) {
  auto a = std::make_shared<TokenizeArgs>();
  CLI::App* c = app.add_subcommand("tokenize", "print the token ids of a text");
  add_model_options(c, a->model, false);
  c->add_option("text", a->text, "text to tokenize")->required();
  c->add_flag("--json", a->json, "print {tokens, pieces, count}");
  c->add_flag("--no-special", a->no_special, "do not add BOS even where the model wants it");
  c->add_flag("--parse-special", a->parse_special, "turn special-token text into special tokens");
  c->callback([a] { run_tokenize(*a); });
}

void register_info(CLI::App& app) {
  auto a = std::make_shared<InfoArgs>();
  CLI::App* c = app.add_subcommand("info", "describe a model: architecture, sizes, tokens");
  add_model_options(c, a->model, false);
  c->add_flag("--json", a->json, "print JSON");
  c->callback([a] { run_info(*a); });
}

}  // namespace lite_llama::cli

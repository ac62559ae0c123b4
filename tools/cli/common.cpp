#include "common.h"

#include <nlohmann/json.hpp>

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <thread>

#include "core/error.h"
#include "core/log.h"
#include "grammar/gbnf_parser.h"
#include "grammar/json_schema.h"
#include "grammar/regex_to_gbnf.h"
#include "env_tuning.h"

namespace lite_llama::cli {

void add_model_options(CLI::App* app, ModelArgs& a, bool engine_sizing) {
  app->add_option("-m,--model", a.engine.model, "GGUF file, HF model directory, or 'default'")
      ->capture_default_str();
  app->add_option("--device", a.device, "auto | cpu | cuda")->capture_default_str();
  app->add_option("-t,--threads", a.engine.backend.threads, "CPU threads (0 = all cores)")
      ->check(CLI::Range(0, 1024));
  if (engine_sizing) {
    app->add_option("-c,--ctx", a.engine.ctx,
                    "max tokens per sequence (0 = the model's limit, at most 131072 on a GPU and 8192 on the CPU; "
                    "cut to the KV pool)")
        ->check(CLI::Range(0, 1 << 24));
    app->add_option("--max-num-seqs", a.engine.max_num_seqs, "sequences per batch (0 = default)")
        ->check(CLI::Range(0, 4096));
    app->add_option("--max-batched-tokens", a.engine.max_batched_tokens,
                    "tokens per step (0 = default; cut to what GPU memory allows, longer prompts "
                    "prefill in chunks)")
        ->check(CLI::Range(0, 1 << 20));
    app->add_option("--max-prefill-with-decodes", a.engine.max_prefill_with_decodes,
                    "prompt tokens at most in a step that also decodes running requests (0 = "
                    "--max-batched-tokens); 2048 keeps streams smooth beside long prompts")
        ->check(CLI::Range(0, 1 << 20))
        ->capture_default_str();
    app->add_option("--kv-tokens", a.engine.kv_tokens, "KV pool size in tokens (0 = auto)")
        ->check(CLI::Range(int64_t(0), int64_t(1) << 31));
    app->add_option("--gpu-memory-utilization", a.engine.gpu_memory_utilization,
                    "fraction of free GPU memory to use")
        ->check(CLI::Range(0.05f, 1.0f));
    app->add_option("--tp", a.engine.tp,
                    "tensor parallelism: split each layer over N GPUs (devices 0..N-1, NCCL), or N CPU ranks")
        ->check(CLI::Range(1, 64));
    app->add_flag("!--no-cuda-graph", a.engine.cuda_graph, "run decode without CUDA graphs");
    app->add_flag("!--no-prefix-cache", a.engine.prefix_cache,
                  "compute every prompt in full (no reuse of cached prefixes)");
    app->add_option("--grammar-warm-ms", a.engine.grammar_warm_ms,
                    "build a new grammar's token-mask cache before its first request decodes, for at most "
                    "this long (0 = off: built during decode)")
        ->check(CLI::Range(0.0, 1e7))
        ->capture_default_str();
    app->add_option("--grammar-warm-threads", a.engine.grammar_warm_threads,
                    "threads of that warm-up (0 = half the cores, at most 8)")
        ->check(CLI::Range(0, 1024));
    app->add_option("--dtype", a.dtype,
                    "CUDA activation type: auto | bf16 | fp16 (auto: fp16 where the model's activations fit "
                    "its range, measured at load, else bf16)")
        ->check(CLI::IsMember({"auto", "bf16", "fp16"}));
    app->add_option("--quantize", a.quantize,
                    "CUDA weights: auto (keep the file's quantisation) | none (16-bit) | int8 (W8A16, "
                    "per channel) | int4 (W4A16, group 128) | fp8 (e4m3, per channel)")
        ->check(CLI::IsMember({"auto", "none", "int8", "int4", "fp8"}));
  }
  app->add_option("--load-format", a.engine.load_format,
                  "auto | dummy (random weights; -m names a config.json)")
      ->check(CLI::IsMember({"auto", "dummy"}));
  app->add_flag("-v,--verbose", a.verbose, "debug logging");
  app->add_flag("-q,--quiet", a.quiet, "only errors on stderr");
}

void add_sampling_options(CLI::App* app, SamplingArgs& s, int default_max_tokens) {
  SamplingParams& p = s.params;
  p.temperature = 0.8f;
  p.top_k = 40;
  p.top_p = 0.95f;
  p.min_p = 0.05f;
  p.max_tokens = default_max_tokens;
  app->add_option("-n,--max-tokens", p.max_tokens, "tokens to generate at most")->capture_default_str();
  app->add_option("--temp,--temperature", p.temperature, "0 = greedy")->capture_default_str();
  app->add_option("--top-k", p.top_k, "0 or -1 = off")->capture_default_str();
  app->add_option("--top-p", p.top_p, "1 = off")->capture_default_str();
  app->add_option("--min-p", p.min_p, "0 = off")->capture_default_str();
  app->add_option("--repeat-penalty,--repetition-penalty", p.repetition_penalty, "1 = off");
  app->add_option("--presence-penalty", p.presence_penalty, "0 = off");
  app->add_option("--frequency-penalty", p.frequency_penalty, "0 = off");
  app->add_option("-s,--seed", s.seed, "RNG seed, 0 to 2^64 - 1 (same seed, same output)");
  app->add_option("--stop", s.stop, "stop string (repeatable)");
  app->add_flag("--ignore-eos", p.ignore_eos, "keep generating past end-of-sequence tokens");
  app->add_option("--min-tokens", p.min_tokens, "no end-of-sequence token or stop string before this many tokens");
  app->add_option("--grammar", s.grammar_file, "GBNF grammar file the output must follow");
  app->add_option("--json-schema", s.json_schema_file, "JSON Schema file the output must follow");
  app->add_option("--regex", s.regex, "regular expression the output must match");
}

void add_chat_template_option(CLI::App* app, ModelArgs& a) {
  app->add_option("--chat-template", a.chat_template,
                  "chat template (Jinja source, or a file of it) used in place of the model's, as vLLM's")
      ->check([](const std::string& v) { return v.empty() ? std::string("empty value (a template or a file)") : ""; });
}

namespace {

// vLLM's rule: a file if there is one; else Jinja source if it has a template's characters, else
// a path that is missing.
std::string load_chat_template(const std::string& arg) {
  std::error_code ec;
  if (std::filesystem::is_regular_file(arg, ec)) {
    std::string text = read_input_file(arg, "--chat-template");
    LL_CHECK(!text.empty(), "--chat-template: '{}' is empty", arg);
    return text;
  }
  LL_CHECK(arg.find_first_of("{}\n") != std::string::npos,
           "--chat-template: '{}' looks like a file path, but it is not a file", arg);
  return arg;
}

}  // namespace

SamplingParams SamplingArgs::resolve() const {
  SamplingParams p = params;
  if (p.top_k == -1) p.top_k = 0;  // off, as vLLM, the server and Python write it
  if (!seed.empty()) {
    // Parsed here: CLI11 clamps an integer too large for the option's type without a word.
    uint64_t v = 0;
    const auto [end, ec] = std::from_chars(seed.data(), seed.data() + seed.size(), v);
    LL_CHECK(ec == std::errc() && end == seed.data() + seed.size(),
             "--seed must be an integer from 0 to 18446744073709551615, got '{}'", seed);
    p.seed = v;
  }
  p.stop = stop;
  const int given = int(!grammar_file.empty()) + int(!json_schema_file.empty()) + int(!regex.empty());
  LL_CHECK(given <= 1, "--grammar, --json-schema and --regex exclude each other");
  if (!grammar_file.empty()) {
    p.grammar = read_input_file(grammar_file, "--grammar");
    // An empty grammar is no grammar to the engine: the file would be ignored.
    LL_CHECK(!p.grammar.empty(), "--grammar: '{}' is empty: the grammar has no rules", grammar_file);
  }
  if (!regex.empty()) p.grammar = grammar::regex_grammar(regex);
  if (!json_schema_file.empty()) {
    const auto schema = nlohmann::ordered_json::parse(read_input_file(json_schema_file, "--json-schema"), nullptr, false);
    LL_CHECK(!schema.is_discarded(), "--json-schema: '{}' is not valid JSON", json_schema_file);
    p.grammar = grammar::json_schema_to_gbnf(schema);
  }
  if (!p.grammar.empty()) grammar::compile_gbnf(p.grammar);  // a bad grammar fails here, named
  p.validate();
  return p;
}

std::string read_input_file(const std::string& path, const char* flag) {
  std::error_code ec;
  LL_CHECK(!std::filesystem::is_directory(path, ec), "{}: '{}' is a directory, not a file", flag, path);
  std::ifstream in(path, std::ios::binary);
  LL_CHECK(in.good(), "{}: cannot read '{}': {}", flag, path, std::strerror(errno));
  std::string text(std::istreambuf_iterator<char>(in), {});
  LL_CHECK(!in.bad(), "{}: error reading '{}'", flag, path);
  return text;
}

EngineOptions resolve_engine_options(const ModelArgs& a) {
  EngineOptions o = a.engine;
  // More CPU threads than the machine has only slows the kernels down (and thousands of them
  // take minutes to start and synchronise).
  const int hw = int(std::thread::hardware_concurrency());
  if (hw > 0 && o.backend.threads > hw) {
    std::fprintf(stderr, "warning: --threads %d is more than the %d hardware threads; using %d\n",
                 o.backend.threads, hw, hw);
    o.backend.threads = hw;
  }
  o.backend.device = parse_device(a.device);
  o.backend.dtype = parse_act_type(a.dtype);
  o.backend.quantize = parse_quant_mode(a.quantize);
  if (!a.chat_template.empty()) o.chat_template = load_chat_template(a.chat_template);
  apply_env_tuning(o.backend);
  return o;
}

std::unique_ptr<Engine> open_engine(ModelArgs& a) {
  set_log_level(a.quiet ? LogLevel::Error : a.verbose ? LogLevel::Debug : LogLevel::Warn);
  if (a.verbose) set_log_level(LogLevel::Debug);
  return Engine::create(resolve_engine_options(a));
}

}  // namespace lite_llama::cli

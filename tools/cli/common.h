// Options shared by the CLI subcommands and small output helpers.
#pragma once
#include <CLI/CLI.hpp>

#include <memory>
#include <string>

#include "lite_llama/engine.h"

namespace lite_llama::cli {

struct ModelArgs {
  EngineOptions engine;
  // Flag spellings of engine.backend's enums, parsed by resolve_engine_options.
  std::string device = "auto", dtype = "auto", quantize = "auto";
  std::string chat_template;  // --chat-template as given: Jinja source or a file of it
  bool verbose = false;
  bool quiet = false;
};

struct SamplingArgs {
  SamplingParams params;
  std::string seed;  // as given: parsed by resolve() into 0 .. 2^64 - 1 (none: a random seed)
  std::vector<std::string> stop;
  std::string grammar_file, json_schema_file, regex;  // constrained decoding (one at most)
  SamplingParams resolve() const;  // validated; the constraint compiled to GBNF
};

void add_model_options(CLI::App* app, ModelArgs& a, bool engine_sizing = true);
void add_sampling_options(CLI::App* app, SamplingArgs& s, int default_max_tokens);
// --chat-template (the commands that render chats: serve, chat, generate).
void add_chat_template_option(CLI::App* app, ModelArgs& a);
// a.engine with the backend options parsed from the flags, --chat-template's file read and the
// documented LITE_LLAMA_* tuning variables of the environment applied (the one place they are read).
EngineOptions resolve_engine_options(const ModelArgs& a);
// The whole file; a directory, a missing or unreadable file fails naming `flag`.
std::string read_input_file(const std::string& path, const char* flag);
// Sets the log level and creates the engine.
std::unique_ptr<Engine> open_engine(ModelArgs& a);

// Thrown by a subcommand to end the program, after unwinding, with this status (`chat`: 130
// for Ctrl-C at its prompt).
struct ExitStatus {
  int code;
};

// Registration of the subcommands (each in its own file).
void register_generate(CLI::App& app);
void register_chat(CLI::App& app);
void register_tokenize(CLI::App& app);
void register_info(CLI::App& app);
void register_score(CLI::App& app);
void register_bench(CLI::App& app);
void register_pull(CLI::App& app);
void register_serve(CLI::App& app);  // where cpp-httplib is installed (LL_HAVE_SERVER)

}  // namespace lite_llama::cli

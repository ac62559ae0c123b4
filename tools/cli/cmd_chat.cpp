// `lite-llama chat`: interactive multi-turn chat with streaming replies; /exit quits.
#include <cstdio>
#include <iostream>
#include <utility>

#include "common.h"
#include "core/timer.h"

namespace lite_llama::cli {
namespace {

struct ChatArgs {
  ModelArgs model;
  SamplingArgs sampling;
  std::string system;
};

ChatMessage message(std::string role, std::string content) {
  ChatMessage m;
  m.role = std::move(role);
  m.content = std::move(content);
  return m;
}

void run_chat(ChatArgs& a) {
  const SamplingParams params = a.sampling.resolve();
  auto engine = open_engine(a.model);
  std::vector<ChatMessage> history;
  if (!a.system.empty()) history.push_back(message("system", a.system));
  std::fprintf(stderr, "lite-llama chat with %s. Type /exit (or Ctrl-D) to quit, /reset to forget.\n",
               engine->info().name.c_str());
  std::string line;
  for (;;) {
    std::fprintf(stderr, "> ");
    std::fflush(stderr);
    if (!std::getline(std::cin, line)) break;
    if (!line.empty() && line.back() == '\r') line.pop_back();  // CRLF input: "/exit\r" is /exit
    // Commands and blank lines as typed with stray spaces: "/reset " resets, "   " sends nothing.
    const size_t b = line.find_first_not_of(" \t"), e = line.find_last_not_of(" \t");
    const std::string cmd = b == std::string::npos ? std::string() : line.substr(b, e - b + 1);
    if (cmd == "/exit" || cmd == "/quit") break;
    if (cmd == "/reset") {
      history.resize(a.system.empty() ? 0 : 1);
      continue;
    }
    if (cmd.empty()) continue;
    history.push_back(message("user", line));
    std::vector<int32_t> ids = engine->tokenize(engine->apply_chat_template(history, true), false, true);
    int64_t id = 0;
    try {
      id = engine->add_request(std::move(ids), params);
    } catch (const std::exception& e) {
      // e.g. the conversation outgrew the context: say so and let the user go on.
      std::fprintf(stderr, "error: %s (use /reset)\n", e.what());
      history.pop_back();
      continue;
    }
    std::string reply;
    int n = 0;
    const double t0 = now_ms();
    while (engine->has_unfinished())
      for (const RequestOutput& o : engine->step()) {
        if (o.id != id) continue;
        n += int(o.tokens.size());
        reply += o.text;
        std::fputs(o.text.c_str(), stdout);
        std::fflush(stdout);
      }
    std::printf("\n");
    std::fflush(stdout);
    if (!a.model.quiet)
      std::fprintf(stderr, "[%d tokens, %.1f tok/s]\n", n, n * 1000.0 / (now_ms() - t0));
    history.push_back(message("assistant", reply));
  }
}

}  // namespace

void register_chat(CLI::App& app) {
  auto a = std::make_shared<ChatArgs>();
  CLI::App* c = app.add_subcommand("chat", "interactive chat (streaming, multi-turn)");
  add_model_options(c, a->model);
  add_sampling_options(c, a->sampling, 512);
  c->add_option("--system", a->system, "system message");
  c->callback([a] { run_chat(*a); });
}

}  // namespace lite_llama::cli

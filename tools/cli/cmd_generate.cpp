// `lite-llama generate`: one or more prompts run as one batch; streams a single prompt's text.
#include <nlohmann/json.hpp>

#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>

#include "common.h"
#include "core/error.h"
#include "core/timer.h"

namespace lite_llama::cli {
namespace {

struct GenerateArgs {
  ModelArgs model;
  SamplingArgs sampling;
  std::vector<std::string> prompts;
  std::string file;
  std::string system;
  bool chat = false;
  bool json = false;
};

struct Result {
  std::string text;
  std::vector<int32_t> tokens;
  int prompt_tokens = 0;
  FinishReason reason = FinishReason::None;
  std::string error;  // why it ended with FinishReason::Error
  double t_first = -1, t_last = 0;
};

// A generation that ended in an error (a grammar with no way on, ...) fails the command after
// its partial output: one line, non-zero exit.
void fail_on_errors(const std::vector<Result>& results) {
  for (size_t i = 0; i < results.size(); ++i)
    if (results[i].reason == FinishReason::Error)
      fail("generation{} ended with an error: {}", results.size() > 1 ? " " + std::to_string(i) : std::string(),
           results[i].error);
}

std::vector<std::string> collect_prompts(const GenerateArgs& a) {
  std::vector<std::string> out = a.prompts;
  if (!a.file.empty()) {
    std::istringstream in(read_input_file(a.file, "--file"));
    for (std::string line; std::getline(in, line);) {
      if (line.ends_with('\r')) line.pop_back();  // a file with CRLF line ends
      if (!line.empty()) out.push_back(line);
    }
  }
  LL_CHECK(!out.empty(), "no prompt given (-p TEXT or --file FILE)");
  for (const std::string& p : out) LL_CHECK(!p.empty(), "the prompt is empty");
  return out;
}

void run_generate(GenerateArgs& a) {
  const std::vector<std::string> prompts = collect_prompts(a);
  const SamplingParams params = a.sampling.resolve();
  auto engine = open_engine(a.model);
  std::map<int64_t, size_t> index;
  std::vector<Result> results(prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) {
    std::string text = prompts[i];
    if (a.chat) {
      std::vector<ChatMessage> msgs;
      if (!a.system.empty()) msgs.push_back({"system", a.system, "", "", ""});
      msgs.push_back({"user", prompts[i], "", "", ""});
      text = engine->apply_chat_template(msgs, true);
    }
    // A rendered chat template holds special tokens; raw prompts are plain text.
    std::vector<int32_t> ids = engine->tokenize(text, !a.chat, a.chat);
    results[i].prompt_tokens = int(ids.size());
    index[engine->add_request(std::move(ids), params)] = i;
  }
  const bool stream = prompts.size() == 1 && !a.json;
  const double t0 = now_ms();
  while (engine->has_unfinished()) {
    for (const RequestOutput& o : engine->step()) {
      Result& r = results[index.at(o.id)];
      const double t = now_ms() - t0;
      if (!o.tokens.empty()) {
        if (r.t_first < 0) r.t_first = t;
        r.t_last = t;
      }
      r.tokens.insert(r.tokens.end(), o.tokens.begin(), o.tokens.end());
      r.text += o.text;
      if (stream && !o.text.empty()) {
        std::fputs(o.text.c_str(), stdout);
        std::fflush(stdout);
      }
      if (o.finished) r.reason = o.finish_reason, r.error = o.error;
    }
  }
  const double total = now_ms() - t0;
  auto decode_tps = [](const Result& r) {
    return r.tokens.size() > 1 && r.t_last > r.t_first
               ? double(r.tokens.size() - 1) * 1000.0 / (r.t_last - r.t_first)
               : 0.0;
  };
  auto to_json = [&](const Result& r) {
    return nlohmann::json{{"text", r.text},
                          {"token_ids", r.tokens},
                          {"prompt_tokens", r.prompt_tokens},
                          {"completion_tokens", r.tokens.size()},
                          {"finish_reason", finish_reason_name(r.reason)},
                          {"ttft_ms", r.t_first},
                          {"decode_tokens_per_s", decode_tps(r)}};
  };
  if (a.json) {
    nlohmann::json j;
    if (results.size() == 1) {
      j = to_json(results[0]);
    } else {
      j["results"] = nlohmann::json::array();
      size_t gen = 0;
      for (const Result& r : results) j["results"].push_back(to_json(r)), gen += r.tokens.size();
      j["total_ms"] = total;
      j["tokens_per_s"] = double(gen) * 1000.0 / total;
    }
    std::printf("%s\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    std::fflush(stdout);
    fail_on_errors(results);
    return;
  }
  if (stream) {
    std::printf("\n");
  } else {
    for (size_t i = 0; i < results.size(); ++i)
      std::printf("--- [%zu] %s\n%s\n", i, prompts[i].c_str(), results[i].text.c_str());
  }
  size_t gen = 0;
  for (const Result& r : results) gen += r.tokens.size();
  const Result& r0 = results[0];
  if (!a.model.quiet)
    std::fprintf(stderr,
                 "[lite-llama] %zu prompt(s), %d prompt tokens (first), TTFT %.1f ms, %zu tokens "
                 "generated in %.0f ms (%.1f tok/s overall, %.1f tok/s decode of the first)\n",
                 results.size(), r0.prompt_tokens, r0.t_first, gen, total,
                 double(gen) * 1000.0 / total, decode_tps(r0));
  std::fflush(stdout);
  fail_on_errors(results);
}

}  // namespace

void register_generate(CLI::App& app) {
  auto a = std::make_shared<GenerateArgs>();
  CLI::App* c = app.add_subcommand("generate", "generate text from one or more prompts");
  add_model_options(c, a->model);
  add_sampling_options(c, a->sampling, 256);
  c->add_option("-p,--prompt", a->prompts, "prompt text (repeatable: runs as one batch)");
  c->add_option("-f,--file", a->file, "file with one prompt per line");
  CLI::Option* chat = c->add_flag("--chat", a->chat, "wrap the prompt in the model's chat template");
  c->add_option("--system", a->system, "system message (with --chat)")->needs(chat);  // ignored without it
  add_chat_template_option(c, a->model);
  c->get_option("--chat-template")->needs(chat);
  c->add_flag("--json", a->json, "print one JSON object with text, tokens and timings");
  c->callback([a] { run_generate(*a); });
}

}  // namespace lite_llama::cli

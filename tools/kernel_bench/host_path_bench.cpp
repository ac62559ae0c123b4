// The server's host work before a request's first step, on the CPU: parse_openai_request and
// prompt_tokens on one saved request body, repeated; prints each stage's median, p10 and p90.
//   host-path-bench --model PATH --body FILE [--ctx N] [--iters N] [--stage parse|prompt|both]
//                   [--load-format dummy]
// A body of a long cached chat (bench/multiturn_bench.py's requests) shows what a turn costs
// once its history is in the KV cache. --stage runs one stage alone, for perf record.
// tests/gpu/dummy_llama.sh's directory with --load-format dummy is the GPU probe's model.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "lite_llama/engine.h"
#include "server/openai_request.h"
#include "server/prompt_tokens.h"
#include "server/server.h"

using namespace lite_llama;
using namespace lite_llama::server;

namespace {

using Clock = std::chrono::steady_clock;

double us_since(Clock::time_point t) {
  return std::chrono::duration<double, std::micro>(Clock::now() - t).count();
}

void report(const char* name, std::vector<double> v) {
  if (v.empty()) return;
  std::sort(v.begin(), v.end());
  auto at = [&](double p) { return v[std::min(v.size() - 1, size_t(p * double(v.size())))]; };
  std::printf("%-7s median %7.1f us  p10 %7.1f  p90 %7.1f  (%zu runs)\n", name, at(0.5), at(0.1),
              at(0.9), v.size());
}

}  // namespace

int main(int argc, char** argv) {
  std::string model, body_path, stage = "both", load_format = "auto";
  int ctx = 8192, iters = 2000;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--model") model = argv[i + 1];
    else if (a == "--body") body_path = argv[i + 1];
    else if (a == "--ctx") ctx = std::atoi(argv[i + 1]);
    else if (a == "--iters") iters = std::atoi(argv[i + 1]);
    else if (a == "--stage") stage = argv[i + 1];
    else if (a == "--load-format") load_format = argv[i + 1];
    else {
      std::fprintf(stderr, "unknown option %s\n", argv[i]);
      return 2;
    }
  }
  if (model.empty() || body_path.empty()) {
    std::fprintf(stderr, "usage: host-path-bench --model FILE --body FILE [--ctx N] [--iters N] "
                         "[--stage S]\n");
    return 2;
  }
  std::ifstream f(body_path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string body = ss.str();

  EngineOptions o;
  o.model = model;
  o.ctx = ctx;
  o.load_format = load_format;
  o.kv_tokens = ctx;
  o.backend.device = DeviceKind::Cpu;
  o.backend.threads = 1;
  auto eng = Engine::create(o);
  RequestLimits lim;
  lim.ctx = eng->info().ctx;
  lim.vocab_size = eng->info().vocab_size;
  lim.model_name = default_model_name(eng->info().path);
  const PromptPolicy policy;

  OpenAIRequest r = parse_openai_request(body, Endpoint::Chat, lim);
  std::printf("body %zu bytes, %zu messages, prompt %zu tokens\n", body.size(), r.messages.size(),
              prompt_tokens(*eng, r, lim, policy).size());
  std::vector<double> parse_us, prompt_us;
  for (int i = 0; i < iters; ++i) {
    if (stage != "prompt") {
      const auto t = Clock::now();
      OpenAIRequest q = parse_openai_request(body, Endpoint::Chat, lim);
      parse_us.push_back(us_since(t));
    }
    if (stage != "parse") {
      ChatPromptInfo info;
      const auto t = Clock::now();
      const std::vector<int32_t> ids = prompt_tokens(*eng, r, lim, policy, &info);
      prompt_us.push_back(us_since(t));
    }
  }
  report("parse", parse_us);
  report("prompt", prompt_us);
  return 0;
}

// `lite-llama bench`: offline throughput/latency of batched generation with random prompts.
// Per batch size: warm-up runs, then timed runs; each run prefills B prompts of prompt-len
// tokens and decodes gen-len tokens each (EOS ignored), greedy. --prompt-lens gives each request
// its own length instead (request b gets lens[b % n]): the token counts of a real prompt set.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <random>
#include <sstream>

#include "common.h"
#include "core/error.h"
#include "core/timer.h"

namespace lite_llama::cli {
namespace {

struct BenchArgs {
  ModelArgs model;
  std::string batches = "1,8,64";
  std::string prompt_lens;
  int prompt_len = 128, gen_len = 256, runs = 5, warmup = 1;
  std::string json_file;
  bool profile = false;
};

struct Stat {
  double median = 0, min = 0, max = 0;
};

Stat stat(std::vector<double> v) {
  Stat s;
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  s.min = v.front();
  s.max = v.back();
  s.median = v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
  return s;
}

nlohmann::json to_json(const Stat& s) {
  return {{"median", s.median}, {"min", s.min}, {"max", s.max}};
}

std::vector<int> parse_int_list(const std::string& s, const char* flag, int lo, int hi) {
  std::vector<int> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');) {
    int v = 0;
    size_t used = 0;
    try {
      v = std::stoi(item, &used);
    } catch (const std::exception&) {
      fail("{}: '{}' is not a number", flag, item);
    }
    LL_CHECK(used == item.size(), "{}: '{}' is not a number", flag, item);
    LL_CHECK(v >= lo && v <= hi, "{} values must be in {}..{}, got {}", flag, lo, hi, v);
    out.push_back(v);
  }
  LL_CHECK(!out.empty(), "{} needs at least one value", flag);
  return out;
}

struct RunResult {
  double total_ms = 0, ttft_ms = 0, prefill_ms = 0, decode_ms = 0;
  std::vector<double> step_ms;
  size_t peak_used = 0;
};

// Prompt length of request b: one length for all, or the list cycled over the batch.
int len_of(const std::vector<int>& lens, int b) { return lens[size_t(b) % lens.size()]; }

int64_t prompt_tokens(const std::vector<int>& lens, int B) {
  int64_t n = 0;
  for (int b = 0; b < B; ++b) n += len_of(lens, b);
  return n;
}

RunResult run_once(Engine& e, int B, const std::vector<int>& lens, int gen_len, uint64_t seed,
                   int64_t vocab, bool profile_decode = false) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int32_t> tok(0, int32_t(std::min<int64_t>(vocab, 32000) - 1));
  SamplingParams p;
  p.temperature = 0;
  p.max_tokens = gen_len;
  p.ignore_eos = true;
  RunResult r;
  const double t0 = now_ms();
  for (int b = 0; b < B; ++b) {
    std::vector<int32_t> ids(static_cast<size_t>(len_of(lens, b)));
    for (auto& t : ids) t = tok(rng);
    e.add_request(std::move(ids), p);
  }
  int first_tokens = 0;
  while (e.has_unfinished()) {
    const double s0 = now_ms();
    int new_first = 0;
    for (const RequestOutput& o : e.step())
      if (o.completion_tokens == 1) ++new_first;
    const double s1 = now_ms();
    if (first_tokens == 0 && new_first > 0) r.ttft_ms = s1 - t0;
    first_tokens += new_first;
    if (first_tokens == B && r.prefill_ms == 0) {
      r.prefill_ms = s1 - t0;
      if (profile_decode) e.set_profiling(true);
    } else if (r.prefill_ms > 0) {
      r.step_ms.push_back(s1 - s0);
    }
    EngineStats st = e.stats();
    r.peak_used = std::max(r.peak_used, st.device_total - st.device_free);
  }
  r.total_ms = now_ms() - t0;
  r.decode_ms = r.total_ms - r.prefill_ms;
  return r;
}

// One eager run with every decode op timed: where a decode step's time goes.
nlohmann::json profile_decode(Engine& e, int B, const std::vector<int>& lens, int gen_len,
                              int64_t vocab) {
  RunResult r = run_once(e, B, lens, gen_len, 999, vocab, true);
  std::vector<Engine::ProfileRow> rows = e.profile_report();
  e.set_profiling(false);
  const double steps = double(r.step_ms.size());
  double wall = 0, busy = 0;
  for (double v : r.step_ms) wall += v;
  std::sort(rows.begin(), rows.end(), [](auto& a, auto& b) { return a.ms > b.ms; });
  nlohmann::json j = {{"batch", B}, {"decode_steps", steps}, {"wall_ms_per_step", wall / steps},
                      {"families", nlohmann::json::array()}};
  std::printf("  profile, batch %d, eager decode step %.3f ms:\n", B, wall / steps);
  for (const auto& row : rows) {
    busy += row.ms;
    std::printf("    %-20s %9.3f ms/step %6.1f%%  %6.1f calls/step\n", row.family.c_str(),
                row.ms / steps, 100.0 * row.ms / wall, double(row.calls) / steps);
    j["families"].push_back({{"family", row.family}, {"ms_per_step", row.ms / steps},
                             {"calls_per_step", double(row.calls) / steps}});
  }
  std::printf("    %-20s %9.3f ms/step %6.1f%%\n", "idle / gaps", (wall - busy) / steps,
              100.0 * (wall - busy) / wall);
  j["gaps_ms_per_step"] = (wall - busy) / steps;
  return j;
}

void run_bench(BenchArgs& a) {
  const std::vector<int> batches = parse_int_list(a.batches, "--batch", 1, 4096);
  LL_CHECK(a.prompt_len >= 1 && a.gen_len >= 2, "--prompt-len >= 1 and --gen-len >= 2 required");
  // Bounded as --prompt-lens is, so that a prompt plus its generation sizes a context in int.
  LL_CHECK(a.prompt_len <= (1 << 20) && a.gen_len <= (1 << 20), "--prompt-len and --gen-len are at most {}",
           1 << 20);
  LL_CHECK(a.runs >= 1 && a.warmup >= 0, "--runs >= 1 and --warmup >= 0 required");
  const std::vector<int> lens = a.prompt_lens.empty()
                                    ? std::vector<int>{a.prompt_len}
                                    : parse_int_list(a.prompt_lens, "--prompt-lens", 1, 1 << 20);
  const int max_len = *std::max_element(lens.begin(), lens.end());
  const int max_b = *std::max_element(batches.begin(), batches.end());
  const int64_t max_prompt_tokens = prompt_tokens(lens, max_b);
  EngineOptions& o = a.model.engine;
  if (o.max_num_seqs == 0) o.max_num_seqs = max_b;
  if (o.ctx == 0) o.ctx = max_len + a.gen_len + 8;
  if (o.kv_tokens == 0) o.kv_tokens = int64_t(max_b) * o.ctx;  // KV pool sized to the run
  // The step token budget sizes the activation arena: the run's prompts in one prefill step, no
  // more (the default 8,192-token budget held 0.8 GiB of Qwen3-4B activations at batch 1), and
  // at most 65,536 tokens (6.6 GiB of those): larger runs prefill in chunks of that.
  // --max-batched-tokens sets any other step size.
  if (o.max_batched_tokens == 0)
    o.max_batched_tokens = int(std::clamp<int64_t>(max_prompt_tokens, max_b, 65536));
  auto engine = open_engine(a.model);
  const ModelInfo& info = engine->info();
  // Decode rates count gen-len tokens a sequence: a context that ends generation sooner made them
  // up (--ctx 64 with 60-token prompts: 724 "tok/s" for a 100 tok/s decode).
  LL_CHECK(int64_t(max_len) + a.gen_len <= int64_t(info.ctx),
           "--prompt-len {} + --gen-len {} exceed the context of {} tokens (--ctx, --kv-tokens)", max_len,
           a.gen_len, info.ctx);
  nlohmann::json out = {{"model", info.name},        {"path", info.path},
                        {"backend", info.backend},   {"weight_dtype", info.weight_dtype},
                        {"prompt_len", max_len},
                        {"prompt_lens", lens},       {"gen_len", a.gen_len},
                        {"runs", a.runs},             {"warmup", a.warmup},
                        {"cuda_graph", o.cuda_graph}, {"weight_bytes", info.weight_bytes},
                        {"kv_bytes", info.kv_bytes},  {"activation_bytes", info.activation_bytes},
                        {"load_ms", info.load_ms},    {"results", nlohmann::json::array()}};
  std::printf("%-6s %12s %12s %12s %10s %22s %14s\n", "batch", "total ms", "prefill t/s",
              "decode t/s", "TTFT ms", "step ms (med/min/max)", "peak GPU MiB");
  uint64_t seed = 1;
  for (int B : batches) {
    for (int w = 0; w < a.warmup; ++w) run_once(*engine, B, lens, a.gen_len, seed++, info.vocab_size);
    std::vector<double> total, ttft, prefill_tps, decode_tps, steps;
    size_t peak = 0;
    for (int r = 0; r < a.runs; ++r) {
      RunResult rr = run_once(*engine, B, lens, a.gen_len, seed++, info.vocab_size);
      total.push_back(rr.total_ms);
      ttft.push_back(rr.ttft_ms);
      prefill_tps.push_back(double(prompt_tokens(lens, B)) * 1000.0 / rr.prefill_ms);
      decode_tps.push_back(double(B) * (a.gen_len - 1) * 1000.0 / rr.decode_ms);
      steps.insert(steps.end(), rr.step_ms.begin(), rr.step_ms.end());
      peak = std::max(peak, rr.peak_used);
    }
    const Stat st = stat(steps), tot = stat(total), tt = stat(ttft), pt = stat(prefill_tps),
               dt = stat(decode_tps);
    std::printf("%-6d %12.1f %12.0f %12.0f %10.2f %8.3f/%6.3f/%6.3f %14.0f\n", B, tot.median,
                pt.median, dt.median, tt.median, st.median, st.min, st.max, double(peak) / (1 << 20));
    std::fflush(stdout);
    nlohmann::json prof;
    if (a.profile) prof = profile_decode(*engine, B, lens, a.gen_len, info.vocab_size);
    out["results"].push_back({{"batch", B},
                              {"profile", prof},
                              {"total_ms", to_json(tot)},
                              {"ttft_ms", to_json(tt)},
                              {"prefill_tokens_per_s", to_json(pt)},
                              {"decode_tokens_per_s", to_json(dt)},
                              {"step_ms", to_json(st)},
                              {"peak_device_bytes", peak}});
  }
  if (!a.json_file.empty()) {
    std::ofstream f(a.json_file);
    LL_CHECK(f.good(), "--json: cannot write '{}'", a.json_file);
    f << out.dump(2) << "\n";
  }
}

}  // namespace

void register_bench(CLI::App& app) {
  auto a = std::make_shared<BenchArgs>();
  CLI::App* c = app.add_subcommand("bench", "offline throughput and latency with random prompts");
  add_model_options(c, a->model);
  c->add_option("--batch", a->batches, "comma-separated batch sizes")->capture_default_str();
  c->add_option("--prompt-len", a->prompt_len, "prompt tokens per request")->capture_default_str();
  c->add_option("--prompt-lens", a->prompt_lens,
                "comma-separated prompt lengths, request b of a batch gets the (b mod n)-th "
                "(a real prompt set's token counts; overrides --prompt-len)");
  c->add_option("--gen-len", a->gen_len, "generated tokens per request")->capture_default_str();
  c->add_option("--runs", a->runs, "timed runs per batch size")->capture_default_str();
  c->add_option("--warmup", a->warmup, "untimed runs first")->capture_default_str();
  c->add_option("--json", a->json_file, "write the results as JSON to FILE");
  c->add_flag("--profile", a->profile, "time every decode op by family (one extra eager run)");
  c->callback([a] { run_bench(*a); });
}

}  // namespace lite_llama::cli

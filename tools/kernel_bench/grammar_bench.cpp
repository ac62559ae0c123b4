// Token-mask speed under a JSON Schema with the real Llama 3.2 vocabulary (CPU only): N matchers
// each take random allowed tokens (seeded), as a model with random weights does, so they visit
// many distinct states; reports the time of each fill_mask (mean, p50, p99) and how often the
// whole-mask cache by state answered.
//   grammar-bench [--tokenizer DIR] [--schema FILE] [--requests N] [--tokens T] [--seed S] [--passes P]
//                 [--warm-threads W] [--warm-ms MS]
// Each pass starts N fresh matchers on the same compiled grammar (as GrammarCache reuses it),
// so pass 2 on shows the cost once the grammar's entries exist. --warm-threads W > 0 runs
// CompiledGrammar::warm() on W threads before pass 1 (as GrammarCache does for a new grammar).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "grammar/gbnf_parser.h"
#include "grammar/json_schema.h"
#include "grammar/token_mask.h"
#include "tokenizer/tokenizer.h"

using namespace lite_llama;

namespace {

// The schema of tests/gpu/structured_speed.sh.
const char* kSchema = R"({"type": "object", "properties": {"name": {"type": "string", "maxLength": 40}, "age": {"type": "integer"},
 "skills": {"type": "array", "items": {"type": "string", "maxLength": 24}, "maxItems": 6},
 "address": {"type": "object", "properties": {"city": {"type": "string"}, "zip": {"type": "string", "pattern": "^[0-9]{5}$"}},
             "required": ["city", "zip"]},
 "active": {"type": "boolean"}}, "required": ["name", "age", "skills", "address", "active"]})";

double pct(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, size_t(p * double(v.size())))];
}

}  // namespace

int main(int argc, char** argv) {
  std::string dir = "models/tokenizers/llama3.2", schema_text = kSchema;
  int requests = 64, tokens = 128, passes = 1, warm_threads = 0;
  double warm_ms = grammar::WarmBudget{}.max_ms;
  long warm_entries = grammar::WarmBudget{}.max_entries;
  uint32_t seed = 1;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i], v = argv[i + 1];
    if (a == "--tokenizer") dir = v;
    else if (a == "--schema") { std::ifstream f(v); std::stringstream s; s << f.rdbuf(); schema_text = s.str(); }
    else if (a == "--requests") requests = std::stoi(v);
    else if (a == "--tokens") tokens = std::stoi(v);
    else if (a == "--passes") passes = std::stoi(v);
    else if (a == "--seed") seed = uint32_t(std::stoul(v));
    else if (a == "--warm-threads") warm_threads = std::stoi(v);
    else if (a == "--warm-ms") warm_ms = std::stod(v);
    else if (a == "--warm-entries") warm_entries = std::stol(v);
    else { std::fprintf(stderr, "unknown option %s\n", a.c_str()); return 2; }
  }
  using clock = std::chrono::steady_clock;
  auto tok = Tokenizer::from_hf_dir(dir);
  const int32_t n_vocab = tok->vocab_size();
  // As engine/grammar_cache.cpp builds it: control tokens and stops match no text.
  std::vector<std::string> bytes(static_cast<size_t>(n_vocab));
  for (int32_t i = 0; i < n_vocab; ++i)
    if (!tok->is_control(i)) bytes[size_t(i)] = tok->token_bytes(i);
  for (int32_t t : tok->stop_ids())
    if (t >= 0 && t < n_vocab) bytes[size_t(t)].clear();
  auto vocab = std::make_shared<grammar::TokenVocab>(std::move(bytes), tok->stop_ids());
  const std::string gbnf = grammar::json_schema_to_gbnf(nlohmann::ordered_json::parse(schema_text));
  const auto t0 = clock::now();
  grammar::CompiledGrammar cg(grammar::compile_gbnf(gbnf), vocab);
  const double compile_ms = std::chrono::duration<double, std::milli>(clock::now() - t0).count();

  if (warm_threads > 0) {
    ThreadPool pool(warm_threads);
    grammar::WarmBudget budget;
    budget.max_ms = warm_ms;
    budget.max_entries = warm_entries;
    const auto w = cg.warm(&pool, budget);
    std::printf("warm-up: %d threads, %.1f ms wall, %ld entries (%.1f ms summed over threads), %ld stacks, %s\n",
                warm_threads, w.ms, w.entries, cg.stats().entry_us / 1000.0, w.stacks,
                w.finished ? "finished" : "stopped by its budget");
  }
  std::mt19937 rng(seed);
  for (int pass = 1; pass <= passes; ++pass) {
  std::vector<grammar::Matcher> ms;
    for (int r = 0; r < requests; ++r) ms.push_back(cg.matcher());
    std::vector<bool> done(size_t(requests), false);
    std::vector<uint32_t> mask(vocab->mask_words());
    std::vector<double> us;
    std::vector<int32_t> allowed;
    const auto stops = vocab->stop_ids();
    long finished = 0;
    const long stats0_hits = cg.stats().state_hits, stats0_fills = cg.stats().fills;
    const long stats0_entries = cg.stats().entries;
    const double stats0_us = cg.stats().entry_us;
    const auto t_all = clock::now();
    // Step by step across the requests, as the engine's batch does.
    for (int step = 0; step < tokens; ++step) {
      for (int r = 0; r < requests; ++r) {
        if (done[size_t(r)]) continue;
        grammar::Matcher& m = ms[size_t(r)];
        const auto a = clock::now();
        cg.fill_mask(m, mask.data());
        us.push_back(std::chrono::duration<double, std::micro>(clock::now() - a).count());
        allowed.clear();
        for (int32_t t = 0; t < n_vocab; ++t)
          if ((mask[size_t(t) / 32] >> (t % 32)) & 1u) allowed.push_back(t);
        if (allowed.empty()) { std::fprintf(stderr, "request %d: empty mask\n", r); return 1; }
        const int32_t t = allowed[std::uniform_int_distribution<size_t>(0, allowed.size() - 1)(rng)];
        if (std::find(stops.begin(), stops.end(), t) != stops.end()) {
          done[size_t(r)] = true;
          ++finished;
          continue;
        }
        if (!m.accept_bytes(vocab->bytes(t))) { std::fprintf(stderr, "request %d: token %d refused\n", r, t); return 1; }
        m.commit();
      }
    }
    const double total_ms = std::chrono::duration<double, std::milli>(clock::now() - t_all).count();
    double sum = 0;
    for (double x : us) sum += x;
    const auto& st = cg.stats();
    const long fills = st.fills - stats0_fills, hits = st.state_hits - stats0_hits;
    std::printf("pass %d: vocab %d, %d requests x %d tokens, seed %u, grammar compile %.1f ms, loop %.0f ms\n", pass, n_vocab,
                requests, tokens, seed, compile_ms, total_ms);
    std::printf("masks %zu: mean %.1f us, p50 %.1f us, p99 %.1f us, max %.1f us; finished %ld\n", us.size(),
                sum / double(us.size()), pct(us, 0.5), pct(us, 0.99), pct(us, 1.0), finished);
    std::printf("state cache hits %ld / %ld (%.1f%%); entries built this pass %ld (%.1f ms), %ld in all; checked "
                "tokens per computed mask %.1f; entries hold %.1f MiB\n",
                hits, fills, fills ? 100.0 * double(hits) / double(fills) : 0.0, st.entries - stats0_entries,
                (st.entry_us - stats0_us) / 1000.0, long(st.entries),
                fills > hits ? double(st.checked) / double(fills - hits) : 0.0, double(st.entry_bytes) / (1 << 20));
  }
  return 0;
}

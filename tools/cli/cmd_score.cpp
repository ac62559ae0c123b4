// `lite-llama score`: teacher-forced log-probabilities and perplexity of token sequences or text.
#include <nlohmann/json.hpp>

#include <climits>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "common.h"
#include "core/error.h"

namespace lite_llama::cli {
namespace {

struct ScoreArgs {
  ModelArgs model;
  std::string tokens_file, text_file, dump_logits;
  int decode_tail = 0;
  bool full = false;
};

void run_score(ScoreArgs& a) {
  LL_CHECK(a.tokens_file.empty() != a.text_file.empty(), "give exactly one of --tokens or --text");
  auto engine = open_engine(a.model);
  std::vector<std::vector<int32_t>> seqs;
  if (!a.tokens_file.empty()) {
    nlohmann::json j = nlohmann::json::parse(read_input_file(a.tokens_file, "--tokens"), nullptr, false);
    LL_CHECK(j.is_array(), "--tokens: '{}' must hold a JSON list of token-id lists", a.tokens_file);
    for (const auto& s : j) {
      LL_CHECK(s.is_array(), "--tokens: every entry must be a list of token ids");
      std::vector<int32_t>& ids = seqs.emplace_back();
      for (const auto& t : s) {  // get<int32_t>() would truncate 1.5 and wrap 2^40
        LL_CHECK(t.is_number_integer() && t.get<int64_t>() >= 0 && t.get<int64_t>() <= INT32_MAX,
                 "--tokens: token ids must be non-negative integers, got {}", t.dump());
        ids.push_back(int32_t(t.get<int64_t>()));
      }
    }
  } else {
    seqs.push_back(engine->tokenize(read_input_file(a.text_file, "--text"), true, false));
  }
  // Before the dump's rows are sized by them (an empty sequence's size() - 1 wrapped).
  LL_CHECK(!seqs.empty(), "--tokens: '{}' holds no sequence to score", a.tokens_file);
  for (size_t i = 0; i < seqs.size(); ++i)
    LL_CHECK(seqs[i].size() >= 2, "sequence {} needs at least 2 tokens to score", i);
  std::ofstream dump;
  if (!a.dump_logits.empty()) {
    dump.open(a.dump_logits, std::ios::binary);
    LL_CHECK(dump.good(), "--dump-logits: cannot write '{}'", a.dump_logits);
  }
  // Rows arrive in prefill-then-decode order; the dump is ordered by (sequence, position).
  std::vector<std::vector<std::vector<float>>> rows;
  LogitsSink sink;
  if (dump.is_open()) {
    rows.resize(seqs.size());
    for (size_t i = 0; i < seqs.size(); ++i) rows[i].resize(seqs[i].size() - 1);
    sink = [&](int s, int pos, const float* l, int64_t V) { rows[size_t(s)][size_t(pos)].assign(l, l + V); };
  }
  std::vector<ScoreResult> res = engine->score(seqs, a.decode_tail, sink);
  for (auto& s : rows)
    for (auto& r : s) dump.write(reinterpret_cast<const char*>(r.data()), std::streamsize(r.size() * 4));
  nlohmann::json out = {{"sequences", nlohmann::json::array()}};
  double nll = 0;
  size_t n = 0;
  for (size_t i = 0; i < res.size(); ++i) {
    double s = 0;
    for (float lp : res[i].logprobs) s -= lp;
    nll += s;
    n += res[i].logprobs.size();
    nlohmann::json e = {{"tokens", seqs[i].size()}, {"nll", s / double(res[i].logprobs.size())},
                        {"ppl", std::exp(s / double(res[i].logprobs.size()))}};
    if (a.full) e["logprobs"] = res[i].logprobs, e["argmax"] = res[i].argmax;
    out["sequences"].push_back(e);
  }
  out["nll"] = nll / double(n);
  out["ppl"] = std::exp(nll / double(n));
  out["scored_tokens"] = n;
  std::printf("%s\n", out.dump(-1).c_str());
}

}  // namespace

void register_score(CLI::App& app) {
  auto a = std::make_shared<ScoreArgs>();
  CLI::App* c = app.add_subcommand("score", "teacher-forced log-probabilities and perplexity");
  add_model_options(c, a->model);
  c->add_option("--tokens", a->tokens_file, "JSON file: a list of token-id lists");
  c->add_option("--text", a->text_file, "text file scored as one sequence");
  c->add_option("--decode-tail", a->decode_tail, "score the last N tokens with decode steps")
      ->check(CLI::Range(0, 1 << 20));
  c->add_option("--dump-logits", a->dump_logits, "write every position's logits (f32) to FILE");
  c->add_flag("--full", a->full, "include per-position logprobs and argmax in the JSON");
  c->callback([a] { run_score(*a); });
}

}  // namespace lite_llama::cli

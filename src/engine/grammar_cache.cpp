#include "engine/grammar_cache.h"

#include <algorithm>

#include "core/log.h"
#include "core/thread_pool.h"
#include "grammar/gbnf_parser.h"

namespace lite_llama {

GrammarCache::~GrammarCache() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  jobs_cv_.notify_all();
  if (worker_.joinable()) worker_.join();
  for (Job& j : jobs_) j.done.set_value();  // never started: nobody waits forever
}

std::shared_ptr<const grammar::CompiledGrammar> GrammarCache::get(const std::string& gbnf,
                                                                  std::shared_future<void>* warmed) {
  std::lock_guard lock(mu_);
  if (auto it = map_.find(gbnf); it != map_.end()) {
    lru_.splice(lru_.begin(), lru_, it->second.lru);
    if (warmed) *warmed = it->second.warmed;
    return it->second.grammar;
  }
  if (!vocab_) {
    // Control tokens stand for no text a grammar could match: never allowed but as a stop.
    std::vector<std::string> bytes(static_cast<size_t>(vocab_size_));
    for (int32_t i = 0; i < vocab_size_; ++i)
      if (!tok_.is_control(i)) bytes[size_t(i)] = tok_.token_bytes(i);
    for (int32_t t : tok_.stop_ids())
      if (t >= 0 && t < vocab_size_) bytes[size_t(t)].clear();
    vocab_ = std::make_shared<grammar::TokenVocab>(std::move(bytes), tok_.stop_ids());
  }
  auto g = std::make_shared<const grammar::CompiledGrammar>(grammar::compile_gbnf(gbnf), vocab_);
  lru_.push_front(gbnf);
  std::shared_future<void> w = start_warm(g);
  map_[gbnf] = {g, w, lru_.begin()};
  if (lru_.size() > kCapacity) {
    map_.erase(lru_.back());
    lru_.pop_back();
  }
  if (warmed) *warmed = w;
  return g;
}

std::shared_future<void> GrammarCache::start_warm(std::shared_ptr<const grammar::CompiledGrammar> g) {
  Job j{std::move(g), {}};
  std::shared_future<void> f = j.done.get_future().share();
  if (warm_opts_.threads < 0 || stop_) {
    j.done.set_value();
    return f;
  }
  if (!worker_.joinable()) {
    try {
      worker_ = std::thread([this] { warm_loop(); });
    } catch (const std::exception& e) {  // no thread: masks are built during decode as before
      LL_WARN("grammar warm-up thread: {}", e.what());
      warm_opts_.threads = -1;
      j.done.set_value();
      return f;
    }
  }
  jobs_.push_back(std::move(j));
  jobs_cv_.notify_one();
  return f;
}

// One grammar at a time, each on a pool of its own threads; the pool lives as long as the
// worker (its threads sleep between warm-ups).
void GrammarCache::warm_loop() {
  const int hw = int(std::thread::hardware_concurrency());
  const int n = warm_opts_.threads > 0 ? warm_opts_.threads : std::clamp(hw / 2, 1, 8);
  std::unique_ptr<ThreadPool> pool;
  grammar::WarmBudget budget = warm_opts_.budget;
  budget.cancel = &stop_;
  for (;;) {
    Job j;
    {
      std::unique_lock lock(mu_);
      jobs_cv_.wait(lock, [&] { return stop_ || !jobs_.empty(); });
      if (stop_) return;  // the destructor answers the jobs left
      j = std::move(jobs_.front());
      jobs_.pop_front();
    }
    try {
      if (!pool && n > 1) pool = std::make_unique<ThreadPool>(n);
      const grammar::WarmReport r = j.grammar->warm(pool.get(), budget);
      LL_DEBUG("grammar warm-up: {} entries over {} stacks in {:.0f} ms on {} threads{}", r.entries, r.stacks,
               r.ms, n, r.finished ? "" : " (stopped by its budget)");
    } catch (const std::exception& e) {
      LL_WARN("grammar warm-up failed ({}): its masks are built during decode", e.what());
    }
    j.done.set_value();
  }
}

}  // namespace lite_llama

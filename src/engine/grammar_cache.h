// Compiled grammars of this engine's tokenizer: the vocabulary's token bytes are read once, and
// each grammar text is compiled once and kept (with its growing token-mask cache) for the
// requests that reuse it, as agents send the same schema again and again. A new grammar's mask
// cache is then built ahead of decode on a background thread (CompiledGrammar::warm).
#pragma once
#include <atomic>
#include <condition_variable>
#include <deque>
#include <future>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>

#include "grammar/token_mask.h"
#include "tokenizer/tokenizer.h"

namespace lite_llama {

class ThreadPool;

struct GrammarWarmOptions {
  int threads = 0;  // < 0: no warm-up; 0: half the hardware threads (1 to 8), as the mask pool
  grammar::WarmBudget budget;
};

class GrammarCache {
 public:
  // `vocab`: token ids the sampler may pick (logits columns past it are padding).
  GrammarCache(const Tokenizer& tok, int vocab, GrammarWarmOptions warm = {})
      : tok_(tok), vocab_size_(vocab), warm_opts_(warm) {}
  // Stops a warm-up in progress (the budget's cancel flag) and waits for the worker.
  ~GrammarCache();
  // Throws lite_llama::Error "grammar: ..." for a bad grammar (compiled here, on the caller's
  // thread). `warmed` (optional): ready once the grammar's warm-up is over (finished, stopped
  // by its budget, or failed: the masks are right in every case, only slower to fill).
  std::shared_ptr<const grammar::CompiledGrammar> get(const std::string& gbnf,
                                                      std::shared_future<void>* warmed = nullptr);
  size_t mask_words() const { return (size_t(vocab_size_) + 31) / 32; }

 private:
  struct Compiled {
    std::shared_ptr<const grammar::CompiledGrammar> grammar;
    std::shared_future<void> warmed;
    std::list<std::string>::iterator lru;
  };
  struct Job {
    std::shared_ptr<const grammar::CompiledGrammar> grammar;
    std::promise<void> done;
  };
  std::shared_future<void> start_warm(std::shared_ptr<const grammar::CompiledGrammar> g);  // mu_ held
  void warm_loop();

  static constexpr size_t kCapacity = 64;
  const Tokenizer& tok_;
  int vocab_size_;
  GrammarWarmOptions warm_opts_;
  std::mutex mu_;
  std::shared_ptr<const grammar::TokenVocab> vocab_;
  std::list<std::string> lru_;  // most recent first
  std::unordered_map<std::string, Compiled> map_;
  std::deque<Job> jobs_;  // warm-ups waiting for the worker
  std::condition_variable jobs_cv_;
  std::atomic<bool> stop_{false};
  std::thread worker_;  // started with the first warm-up
};

}  // namespace lite_llama

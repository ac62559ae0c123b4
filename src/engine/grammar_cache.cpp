#include "engine/grammar_cache.h"

#include "grammar/gbnf_parser.h"

namespace lite_llama {

std::shared_ptr<const grammar::CompiledGrammar> GrammarCache::get(const std::string& gbnf) {
  std::lock_guard lock(mu_);
  if (auto it = map_.find(gbnf); it != map_.end()) {
    lru_.splice(lru_.begin(), lru_, it->second.second);
    return it->second.first;
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
  map_[gbnf] = {g, lru_.begin()};
  if (lru_.size() > kCapacity) {
    map_.erase(lru_.back());
    lru_.pop_back();
  }
  return g;
}

}  // namespace lite_llama

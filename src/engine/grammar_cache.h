// Compiled grammars of this engine's tokenizer: the vocabulary's token bytes are read once, and
// each grammar text is compiled once and kept (with its growing token-mask cache) for the
// requests that reuse it, as agents send the same schema again and again.
#pragma once
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "grammar/token_mask.h"
#include "tokenizer/tokenizer.h"

namespace lite_llama {

class GrammarCache {
 public:
  // `vocab`: token ids the sampler may pick (logits columns past it are padding).
  GrammarCache(const Tokenizer& tok, int vocab) : tok_(tok), vocab_size_(vocab) {}
  // Throws lite_llama::Error "grammar: ..." for a bad grammar.
  std::shared_ptr<const grammar::CompiledGrammar> get(const std::string& gbnf);
  size_t mask_words() const { return (size_t(vocab_size_) + 31) / 32; }

 private:
  static constexpr size_t kCapacity = 64;
  const Tokenizer& tok_;
  int vocab_size_;
  std::mutex mu_;
  std::shared_ptr<const grammar::TokenVocab> vocab_;
  std::list<std::string> lru_;  // most recent first
  std::unordered_map<std::string, std::pair<std::shared_ptr<const grammar::CompiledGrammar>,
                                            std::list<std::string>::iterator>> map_;
};

}  // namespace lite_llama

// Token masks: which tokens of a vocabulary may come next in a grammar's current state.
//
// TokenVocab holds the tokenizer's token bytes sorted, so that walking them through a matcher
// shares each common prefix (a vocabulary trie walked in order with rollback). CompiledGrammar
// caches, per grammar position (a byte-set element at the top of a stack), the tokens that
// position accepts or rejects whatever the stack below it holds, and keeps the few that run past
// the end of the position's rule ("uncertain") to be checked against the real stacks at run
// time: XGrammar's adaptive token mask cache in a simple form. Entries are built through a
// lazily built byte automaton (bytes of a state seen before cost a table lookup), and the rules
// of one bounded repetition share an entry (Grammar::ChainPos): a fresh JSON schema otherwise
// built one for each of the 20 whitespace and 40 maxLength rules, ~2 ms to 50 ms each.
// warm() builds the entries ahead of decode (token_mask_warm.cpp).
#pragma once
#include <cstdint>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "grammar/grammar.h"
#include "grammar/matcher.h"

namespace lite_llama {
class ThreadPool;
}

namespace lite_llama::grammar {

// Limits of CompiledGrammar::warm(): a grammar with very many stacks stops early (the rest is
// built lazily during decode, as without warm-up).
struct WarmBudget {
  long max_entries = 8192;   // entries built (16 KiB each over a 128k vocabulary)
  // Bytes those entries hold: the engine keeps up to 64 compiled grammars, and the benchmark
  // schema's full warm-up holds ~50 MiB over the Llama 3.2 vocabulary.
  long max_bytes = 64L << 20;
  long max_stacks = 200000;  // stacks enumerated
  double max_ms = 2000;
  const std::atomic<bool>* cancel = nullptr;  // set: stop as soon as possible
};

struct WarmReport {
  long stacks = 0, entries = 0;  // stacks visited, entries this warm-up built
  double ms = 0;
  bool finished = false;  // every stack was visited within the budget
};

class TokenVocab {
 public:
  // bytes[id]: the raw bytes token id stands for; "" for tokens a grammar never allows
  // (control tokens). stop_ids: allowed exactly when the grammar may end.
  TokenVocab(std::vector<std::string> bytes, std::vector<int32_t> stop_ids);

  int32_t size() const { return int32_t(bytes_.size()); }
  size_t mask_words() const { return (bytes_.size() + 31) / 32; }
  const std::string& bytes(int32_t id) const { return bytes_[size_t(id)]; }
  // Ids of non-empty tokens in byte order.
  const std::vector<int32_t>& sorted() const { return sorted_; }
  const std::vector<int32_t>& stop_ids() const { return stop_ids_; }
  // The bytes of sorted()[k], from one buffer in sorted order: walks read tokens in that order,
  // and chasing each std::string across the heap cost more than the matcher did.
  std::string_view sorted_bytes(size_t k) const {
    return {text_.data() + offsets_[k], size_t(offsets_[k + 1] - offsets_[k])};
  }

 private:
  std::vector<std::string> bytes_;
  std::vector<int32_t> sorted_, stop_ids_;
  std::string text_;
  std::vector<uint32_t> offsets_;
};

class CompiledGrammar {
 public:
  // few: a position whose cached entry leaves more uncertain tokens than this is looked up
  // again with the stack frame below it added (tests lower it to exercise deep entries).
  CompiledGrammar(Grammar g, std::shared_ptr<const TokenVocab> vocab, size_t few = kFew);

  const Grammar& grammar() const { return grammar_; }
  const TokenVocab& vocab() const { return *vocab_; }
  Matcher matcher() const { return Matcher(grammar_); }
  // Sets mask bit t (mask[t / 32] >> t % 32) for each token the matcher's state allows, and the
  // stop ids when the input may end here. `mask` has vocab().mask_words() words. The matcher
  // is left as it was. Safe to call from several threads with different matchers.
  void fill_mask(Matcher& m, uint32_t* mask) const;

  // Builds, on `pool`'s threads (null: the caller's only), the entries fill_mask() would build
  // for every stack the grammar can produce (token_mask_warm.cpp), shallow stacks first, within
  // `budget`. Safe to run while other threads call fill_mask(); the masks do not change.
  WarmReport warm(ThreadPool* pool, const WarmBudget& budget = {}) const;

  // Counters for benchmarks (relaxed, approximate under concurrency).
  struct Stats {
    long fills = 0, state_hits = 0, entries = 0, checked = 0;  // checked: uncertain tokens walked
    double entry_us = 0;                                        // time building entries
    long entry_bytes = 0;                                       // held by the entries' vectors
  };
  Stats stats() const {
    return {fills_.load(),   state_hits_.load(),         entries_.load(),
            checked_.load(), double(entry_us_.load()), entry_bytes_.load()};
  }

 private:
  // Inside a JSON string every token longer than one character runs past the end of the
  // character rule: a position alone leaves most of the vocabulary uncertain, its caller's
  // frames settle all but the few that close the string. Walking one uncertain token against
  // the real stacks costs ~0.1 us.
  static constexpr size_t kFew = 128, kMaxDepth = 16;
  // An entry below a chain frame walks its shallower entry's uncertain tokens when there are
  // at most few * kWalkFew of them (~0.1 ms through the automaton), else narrows.
  static constexpr size_t kWalkFew = 32;
  struct Entry {
    // Accepted token ids: a bitmask, or (fewer ids than the mask has words) a list, with the
    // bitmask empty. Most entries of a schema accept a few tokens (inside literals), and a
    // warm-up builds thousands: 16 KiB each over a 128k vocabulary as bitmasks.
    std::vector<uint32_t> accepted;
    std::vector<int32_t> accepted_ids;
    std::vector<int32_t> uncertain;  // indices into vocab().sorted(), ascending
  };
  // The entry of a stack's top frames (positions top first; complete: down to the root).
  // `base`: the entry of fewer of the same frames, whose verdicts a deeper entry keeps.
  const Entry& entry(const std::vector<int32_t>& top_down, bool complete, const Entry* base) const;
  // The entry of frames with chain positions (Grammar::chain) from `canon`, the entry of the
  // same frames at their chains' longest rules: only tokens long enough to run out of a
  // chain's repetitions are walked again.
  const Entry& narrowed(const std::vector<int32_t>& top_down, bool complete, const Entry& canon) const;
  const Entry& insert(std::string key, std::unique_ptr<Entry> e, std::chrono::steady_clock::time_point t0) const;
  // The cached entry of `key`, or null after claiming it: the caller builds it and insert()s it
  // (or the Claim's destructor gives it up). Waits while another thread builds the same key, so
  // that a warm-up and the mask threads never build one entry twice.
  const Entry* find_or_claim(const std::string& key) const;
  struct Claim {
    const CompiledGrammar* g;
    const std::string* key;
    ~Claim();
  };
  // The lookup of one stack's entries, a frame at a time (compute_mask and warm share it): `e`
  // of the real frames (null when not built), `c` of the frames at their chains' longest rules.
  struct Level {
    const Entry *e = nullptr, *c = nullptr;
    bool aliased = false;
  };
  // Goes from frames [0, k-1) to [0, k) of `stack` (`canon`: the same at the chains' longest
  // rules); last: stack has k frames (complete: down to the root). True once e leaves few tokens.
  bool deepen(Level& lv, const std::vector<int32_t>& stack, const std::vector<int32_t>& canon, size_t k,
              bool complete, bool last) const;
  void canonical(const std::vector<int32_t>& stack, std::vector<int32_t>& canon) const;
  void accepted_bits(const Entry& e, std::vector<uint32_t>& bits) const;  // e's accepted as a bitmask
  void compute_mask(Matcher& m, uint32_t* mask) const;

  Grammar grammar_;
  std::shared_ptr<const TokenVocab> vocab_;
  size_t few_;
  uint8_t cls_[256];  // byte -> class: bytes in the same byte sets
  size_t ncls_ = 0;
  // Per chain's first-byte set: (bytes in the set after the first, index into sorted()) of the
  // tokens with one or more, most first.
  std::unordered_map<int32_t, std::vector<std::pair<int32_t, int32_t>>> counts_;
  mutable std::mutex mu_;
  // Keyed by the positions' bytes plus 'C' for a complete stack. Entries are never dropped:
  // their number is bounded by the grammar's distinct stack tops.
  mutable std::unordered_map<std::string, std::unique_ptr<Entry>> cache_;
  mutable std::unordered_set<std::string> building_;  // keys claimed and being built
  mutable std::condition_variable built_;
  // Whole masks by matcher state (Matcher::state_key): outputs revisit the same states (every
  // separator, the start of every value), so many steps copy a mask. Bounded in bytes.
  static constexpr size_t kStateCacheBytes = size_t(64) << 20;
  mutable std::unordered_map<std::string, std::vector<uint32_t>> states_;
  mutable size_t state_bytes_ = 0;
  mutable std::atomic<long> fills_{0}, state_hits_{0}, entries_{0}, checked_{0}, entry_us_{0}, entry_bytes_{0};
};

}  // namespace lite_llama::grammar

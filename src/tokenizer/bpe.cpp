#include "tokenizer/bpe.h"

#include <algorithm>
#include <atomic>
#include <queue>

#include "core/error.h"
#include "tokenizer/unicode.h"

namespace lite_llama {

namespace {

uint64_t pair_key(int32_t left, int32_t right) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
}

uint64_t hash_key(uint64_t k) {
  // Fibonacci hashing spreads both ids over the high bits; folding them down feeds the low
  // bits the table indexes with.
  k *= 0x9E3779B97F4A7C15ull;
  return k ^ (k >> 29);
}

struct Symbol {
  int32_t id;
  int32_t prev;
  int32_t next;
  bool alive;
};

struct Candidate {
  int32_t rank;
  int32_t left;   // symbol index
  int32_t right;  // symbol index expected next to `left`
  int32_t left_id, right_id;
  int32_t merged;
  // Lowest rank first, then leftmost: the order HF's BPE merges in.
  bool operator>(const Candidate& o) const {
    return rank != o.rank ? rank > o.rank : left > o.left;
  }
};

// Per-thread scratch so that encoding a piece allocates nothing in the steady state.
// Pieces recur (words of a language, the history a chat sends again each turn): each thread
// remembers the ids of the last model's short pieces, as HF's BPE keeps a word cache.
constexpr size_t kCacheMaxPiece = 48, kCacheMaxEntries = 1 << 16;

struct Scratch {
  std::vector<Symbol> symbols;
  std::vector<Candidate> heap;
  std::vector<int32_t> ids;
  std::string word;
  std::string key;           // the piece's cache key: ignore_merges tag + bytes
  uint64_t cache_owner = 0;  // BpeModel::uid_ whose pieces `cache` holds
  std::unordered_map<std::string, std::vector<int32_t>> cache;  // (ignore_merges tag + piece) -> ids
};

std::atomic<uint64_t> next_uid{1};

Scratch& scratch() {
  thread_local Scratch s;
  return s;
}

}  // namespace

void BpeModel::init_tokens() {
  index_.reserve(tokens_.size());
  // A duplicated string maps to its last id, as a Python dict built from the list would.
  for (size_t i = 0; i < tokens_.size(); ++i) {
    if (!tokens_[i].empty()) index_[tokens_[i]] = static_cast<int32_t>(i);
  }
  const auto& sym = unicode::byte_to_symbol();
  for (int b = 0; b < 256; ++b) byte_token_[b] = find(sym[b]);
}

void BpeModel::reserve_merges(size_t n) {
  size_t cap = 16;
  while (cap < n * 2) cap *= 2;
  merges_.assign(cap, MergeEntry{kEmpty, 0, 0});
  mask_ = cap - 1;
}

void BpeModel::add_merge(std::string_view left, std::string_view right, size_t rank,
                         std::string_view merges_key, std::string_view shown) {
  const int32_t l = find(left), rt = find(right);
  LL_CHECK(l >= 0 && rt >= 0, "{}[{}]: merge '{}' references '{}', which is not a token",
           merges_key, rank, shown, l < 0 ? left : right);
  thread_local std::string merged;
  merged.assign(left);
  merged.append(right);
  const int32_t id = find(merged);
  LL_CHECK(id >= 0, "{}[{}]: merge '{}' produces '{}', which is not a token", merges_key, rank,
           shown, merged);
  insert_merge(pair_key(l, rt), static_cast<int32_t>(rank), id);
}

BpeModel::BpeModel(std::vector<std::string> tokens, const std::vector<std::string>& merges,
                   std::string_view merges_key)
    : uid_(next_uid++), tokens_(std::move(tokens)) {
  init_tokens();
  reserve_merges(merges.size());
  for (size_t r = 0; r < merges.size(); ++r) {
    const std::string& m = merges[r];
    // Split at the first space after the first character: a left part may itself be a space
    // in vocabularies that are not byte-level.
    const size_t sp = m.size() > 1 ? m.find(' ', 1) : std::string::npos;
    LL_CHECK(sp != std::string::npos, "{}[{}]: merge '{}' is not two tokens separated by a space",
             merges_key, r, m);
    add_merge(std::string_view(m.data(), sp), std::string_view(m).substr(sp + 1), r, merges_key,
              m);
  }
}

BpeModel::BpeModel(std::vector<std::string> tokens,
                   const std::vector<std::pair<std::string, std::string>>& merges,
                   std::string_view merges_key)
    : uid_(next_uid++), tokens_(std::move(tokens)) {
  init_tokens();
  reserve_merges(merges.size());
  for (size_t r = 0; r < merges.size(); ++r) {
    const auto& [left, right] = merges[r];
    add_merge(left, right, r, merges_key, left + " " + right);
  }
}

int32_t BpeModel::find(std::string_view text) const {
  auto it = index_.find(text);
  return it == index_.end() ? -1 : it->second;
}

void BpeModel::insert_merge(uint64_t key, int32_t rank, int32_t id) {
  for (uint64_t i = hash_key(key) & mask_;; i = (i + 1) & mask_) {
    MergeEntry& e = merges_[i];
    if (e.key == kEmpty || e.key == key) {
      // A repeated pair keeps its last rank, as HF's merge map (collected into a HashMap) does.
      e = MergeEntry{key, rank, id};
      return;
    }
  }
}

const BpeModel::MergeEntry* BpeModel::find_merge(int32_t left, int32_t right) const {
  const uint64_t key = pair_key(left, right);
  for (uint64_t i = hash_key(key) & mask_;; i = (i + 1) & mask_) {
    const MergeEntry& e = merges_[i];
    if (e.key == key) return &e;
    if (e.key == kEmpty) return nullptr;
  }
}

void BpeModel::encode_piece(std::string_view bytes, bool ignore_merges,
                            std::vector<int32_t>& out) const {
  if (bytes.empty()) return;
  if (bytes.size() == 1) {
    const int32_t id = byte_token_[static_cast<uint8_t>(bytes[0])];
    if (id >= 0) out.push_back(id);
    return;
  }
  Scratch& s = scratch();
  if (s.cache_owner != uid_) s.cache.clear(), s.cache_owner = uid_;
  const bool cacheable = bytes.size() <= kCacheMaxPiece;
  if (cacheable) {
    s.key.assign(1, ignore_merges ? '1' : '0');
    s.key.append(bytes);
    if (auto it = s.cache.find(s.key); it != s.cache.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  const size_t first = out.size();
  encode_uncached(bytes, ignore_merges, out);
  if (cacheable) {
    if (s.cache.size() >= kCacheMaxEntries) s.cache.clear();
    s.cache.emplace(s.key, std::vector<int32_t>(out.begin() + std::ptrdiff_t(first), out.end()));
  }
}

void BpeModel::encode_uncached(std::string_view bytes, bool ignore_merges, std::vector<int32_t>& out) const {
  Scratch& s = scratch();
  if (ignore_merges) {
    s.word.clear();
    const auto& sym = unicode::byte_to_symbol();
    for (char c : bytes) s.word += sym[static_cast<uint8_t>(c)];
    const int32_t id = find(s.word);
    if (id >= 0) {
      out.push_back(id);
      return;
    }
  }

  auto& ids = s.ids;
  ids.clear();
  for (char c : bytes) {
    const int32_t id = byte_token_[static_cast<uint8_t>(c)];
    if (id >= 0) ids.push_back(id);
  }
  merge_ids(ids, out);
}

void BpeModel::merge_ids(const std::vector<int32_t>& ids, std::vector<int32_t>& out) const {
  if (ids.size() <= 1) {
    out.insert(out.end(), ids.begin(), ids.end());
    return;
  }
  Scratch& s = scratch();
  auto& syms = s.symbols;
  syms.clear();
  for (int32_t id : ids) {
    const auto n = static_cast<int32_t>(syms.size());
    syms.push_back(Symbol{id, n - 1, n + 1, true});
  }
  syms.back().next = -1;

  auto& heap = s.heap;
  heap.clear();
  const auto cmp = std::greater<Candidate>();
  auto push_pair = [&](int32_t left) {
    const int32_t right = syms[left].next;
    if (right < 0) return;
    if (const MergeEntry* m = find_merge(syms[left].id, syms[right].id)) {
      heap.push_back(Candidate{m->rank, left, right, syms[left].id, syms[right].id, m->id});
      std::push_heap(heap.begin(), heap.end(), cmp);
    }
  };
  for (int32_t i = 0; i + 1 < static_cast<int32_t>(syms.size()); ++i) push_pair(i);

  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), cmp);
    const Candidate c = heap.back();
    heap.pop_back();
    Symbol& l = syms[c.left];
    // Skip candidates made stale by an earlier merge on either side.
    if (!l.alive || l.next != c.right || l.id != c.left_id) continue;
    Symbol& r = syms[c.right];
    if (!r.alive || r.id != c.right_id) continue;
    l.id = c.merged;
    l.next = r.next;
    if (r.next >= 0) syms[r.next].prev = c.left;
    r.alive = false;
    if (l.prev >= 0) push_pair(l.prev);
    push_pair(c.left);
  }
  for (int32_t i = 0; i >= 0; i = syms[i].next) out.push_back(syms[i].id);
}

}  // namespace lite_llama

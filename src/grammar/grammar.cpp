#include "grammar/grammar.h"

#include <algorithm>
#include <map>
#include <unordered_map>

#include "core/error.h"
#include "grammar/matcher.h"

namespace lite_llama::grammar {

namespace {

constexpr int kMaxRepeat = 2000;  // bounded repetition is unrolled: keep grammars finite
// Nested repetitions merged into one (Lowering::flat) may reach further; past this they are refused.
constexpr long kMaxMergedRepeat = 250000;
// A sequence of one item's repetitions merged into one (Lowering::seq_as_repeat) unrolls up to this.
constexpr long kMaxSeqMerge = 16384;
// Size limits, refused when the grammar is built rather than met during decode: elements bound
// the memory and the per-grammar tables (~90 ms to lower a million), and a rule's alternatives
// are all expanded in one matcher step, which gives up past 2^16 expansions (Matcher).
constexpr size_t kMaxElements = size_t(1) << 20;
constexpr size_t kMaxAlternatives = size_t(1) << 15;

using Alt = std::vector<Elem>;
using Alts = std::vector<Alt>;

// Splits a same-length code point range into UTF-8 byte-range sequences (each position a
// contiguous byte range), the classic utf8-ranges construction.
void utf8_split(uint32_t lo, uint32_t hi, std::vector<std::vector<std::pair<uint8_t, uint8_t>>>& out) {
  const int n = lo < 0x80 ? 1 : lo < 0x800 ? 2 : lo < 0x10000 ? 3 : 4;
  for (int i = 1; i < n; ++i) {
    const uint32_t m = (1u << (6 * i)) - 1;
    if ((lo & ~m) != (hi & ~m)) {
      if ((lo & m) != 0) {
        utf8_split(lo, lo | m, out);
        utf8_split((lo | m) + 1, hi, out);
        return;
      }
      if ((hi & m) != m) {
        utf8_split(lo, (hi & ~m) - 1, out);
        utf8_split(hi & ~m, hi, out);
        return;
      }
    }
  }
  std::string a, b;
  append_utf8(a, lo);
  append_utf8(b, hi);
  std::vector<std::pair<uint8_t, uint8_t>> seq;
  for (size_t k = 0; k < a.size(); ++k) seq.emplace_back(uint8_t(a[k]), uint8_t(b[k]));
  out.push_back(std::move(seq));
}

}  // namespace

// Turns RuleDefs into the flat form; helper rules are appended as they are needed.
class Lowering {
 public:
  explicit Lowering(const std::vector<RuleDef>& defs) : defs_(defs) {
    for (const auto& d : defs) {
      LL_CHECK(!ids_.count(d.name), "grammar: rule '{}' is defined twice", d.name);
      ids_[d.name] = new_rule(d.name);
    }
  }

  Grammar run(const std::string& root) {
    auto it = ids_.find(root);
    LL_CHECK(it != ids_.end(), "grammar: no rule named '{}' (the start rule)", root);
    for (size_t i = 0; i < defs_.size(); ++i) {
      current_ = defs_[i].name;
      tmp_[i] = lower_alts(*defs_[i].body);
    }
    g_.root_ = it->second;
    compute_nullable();
    repeat_nonempty();
    check_size();
    flatten();
    check_left_recursion();
    mark_chains();
    // The start state is every request's first: one the matcher cannot hold is refused here.
    LL_CHECK(!Matcher(g_).overflowed(),
             "grammar: its start opens too many alternatives at once: too large or ambiguous for the matcher");
    return std::move(g_);
  }

 private:
  int32_t new_rule(const std::string& name) {
    tmp_.emplace_back();
    g_.names_.push_back(name);
    return int32_t(tmp_.size() - 1);
  }
  int32_t helper(Alts alts) {
    const int32_t r = new_rule(current_ + "-" + std::to_string(++helpers_));
    tmp_[size_t(r)] = std::move(alts);
    return r;
  }
  int32_t byte_set(const ByteSet& s) {
    auto [it, fresh] = set_ids_.try_emplace(s, int32_t(g_.byte_sets_.size()));
    if (fresh) g_.byte_sets_.push_back(s);
    return it->second;
  }

  Alts lower_alts(const Expr& e) {
    Alts out;
    if (e.kind == Expr::Kind::Alt) {
      for (const auto& item : e.items) {
        Alts sub = lower_alts(*item);
        for (auto& a : sub) out.push_back(std::move(a));
      }
      return out;
    }
    out.emplace_back();
    lower_seq(e, out.back());
    return out;
  }

  void lower_seq(const Expr& e, Alt& out) {
    switch (e.kind) {
      case Expr::Kind::Seq:
        for (const auto& item : e.items) lower_seq(*item, out);
        return;
      case Expr::Kind::Alt:
        if (e.items.size() == 1) return lower_seq(*e.items[0], out);
        out.push_back({Elem::Rule, helper(lower_alts(e))});
        return;
      case Expr::Kind::Chars:
        return lower_chars(e.ranges, out);
      case Expr::Kind::RuleRef: {
        auto it = ids_.find(e.rule);
        LL_CHECK(it != ids_.end(), "grammar: rule '{}' uses undefined rule '{}'", current_, e.rule);
        out.push_back({Elem::Rule, it->second});
        return;
      }
      case Expr::Kind::Repeat:
        return lower_repeat(e, out);
    }
  }

  void lower_chars(const std::vector<CodeRange>& ranges, Alt& out) {
    LL_CHECK(!ranges.empty(), "grammar: rule '{}' has a character class that matches nothing",
             current_);
    ByteSet ascii;
    std::vector<CodeRange> wide;
    for (const auto& r : ranges) {
      for (uint32_t c = r.lo; c <= std::min<uint32_t>(r.hi, 0x7F); ++c) ascii.set(c);
      if (r.hi >= 0x80) wide.push_back({std::max<uint32_t>(r.lo, 0x80), r.hi});
    }
    if (wide.empty()) {
      out.push_back({Elem::Bytes, byte_set(ascii)});
      return;
    }
    std::string key;
    for (const auto& r : ranges) key += std::to_string(r.lo) + "-" + std::to_string(r.hi) + ",";
    auto it = class_rules_.find(key);
    if (it == class_rules_.end()) {
      Alts alts;
      if (ascii.any()) alts.push_back({{Elem::Bytes, byte_set(ascii)}});
      std::vector<std::vector<std::pair<uint8_t, uint8_t>>> seqs;
      for (auto r : wide) {
        // UTF-8 cannot encode surrogates; split at each encoded-length boundary.
        for (auto [blo, bhi] : {std::pair<uint32_t, uint32_t>{0x80, 0x7FF}, {0x800, 0xD7FF},
                                {0xE000, 0xFFFF}, {0x10000, 0x10FFFF}}) {
          const uint32_t lo = std::max(r.lo, blo), hi = std::min(r.hi, bhi);
          if (lo <= hi) utf8_split(lo, hi, seqs);
        }
      }
      for (const auto& s : seqs) {
        Alt a;
        for (auto [lo, hi] : s) {
          ByteSet b;
          for (int c = lo; c <= hi; ++c) b.set(size_t(c));
          a.push_back({Elem::Bytes, byte_set(b)});
        }
        alts.push_back(std::move(a));
      }
      LL_CHECK(!alts.empty(), "grammar: rule '{}' has a character class that matches nothing",
               current_);
      it = class_rules_.emplace(key, helper(std::move(alts))).first;
    }
    out.push_back({Elem::Rule, it->second});
  }

  // x{min,max} with x itself a repetition z{a,p}: the union over k in [min, max] of z{ka,kp}.
  // Where those counts leave no gap it is z{min*a, max*p}, one stack per count instead of one
  // per way to split the count into groups: (.{0,99}){0,99} otherwise gains ~900 stacks a
  // character and goes past the matcher's bound on a step (Matcher) at the 46th.
  struct Flat {
    const Expr* x;
    long min, max;     // max -1: unbounded
    bool seq = false;  // a sequence's counts were added up (seq_as_repeat) on the way
  };
  Flat flat(const Expr& x, int min, int max) {
    LL_CHECK(min >= 0 && min <= kMaxRepeat && (max < 0 || (max >= min && max <= kMaxRepeat)),
             "grammar: rule '{}' has repetition bounds {{{},{}}} outside 0..{}", current_, min, max,
             kMaxRepeat);
    const Expr* in = unwrap(&x);
    if (max == 0) return {&x, min, max};
    Flat z{nullptr, 0, 0};
    if (in->kind == Expr::Kind::Repeat)
      z = flat(*in->items[0], in->min, in->max);
    else if (!seq_as_repeat(*in, z))
      return {&x, min, max};
    if (z.max == 0) return {&x, min, max};
    // z{ka,kp} and z{(k+1)a,(k+1)p} meet when (k+1)a <= kp + 1, hardest at the smallest k.
    const bool no_gap = z.max < 0 ? (min >= 1 || z.min <= 1) : z.min + min * (z.min - z.max) <= 1;
    if (!no_gap) return {&x, min, max};  // few ways to split a count: the stacks stay few
    const long lo = min * z.min, hi = z.max < 0 || max < 0 ? -1 : max * z.max;
    // Merged sequences unroll into chains that the groups' rules shared: past a bound, kept as
    // written ((a{1000,2000}a{1000,2000}){1,62} would lower to a million elements).
    if (z.seq && (hi < 0 ? lo : hi) > kMaxSeqMerge) return {&x, min, max};
    // Left nested, these would have about as many stacks as repetitions: refused here rather
    // than by the matcher's bounds in the middle of an output.
    LL_CHECK(lo <= kMaxMergedRepeat && hi <= kMaxMergedRepeat,
             "grammar: rule '{}' nests repetitions {{{},{}}} of {{{},{}}}, more than {} repetitions in all: too "
             "ambiguous for the matcher",
             current_, min, max, z.min, z.max, kMaxMergedRepeat);
    return {z.x, lo, hi, z.seq};
  }

  static const Expr* unwrap(const Expr* e) {
    while ((e->kind == Expr::Kind::Seq || e->kind == Expr::Kind::Alt) && e->items.size() == 1) e = e->items[0].get();
    return e;
  }
  // The same language by construction: equal trees (single-item groups looked through).
  static bool same(const Expr& a0, const Expr& b0) {
    const Expr& a = *unwrap(&a0);
    const Expr& b = *unwrap(&b0);
    if (a.kind != b.kind || a.items.size() != b.items.size() || a.ranges.size() != b.ranges.size()) return false;
    if (a.kind == Expr::Kind::Repeat && (a.min != b.min || a.max != b.max)) return false;
    if (a.kind == Expr::Kind::RuleRef && a.rule != b.rule) return false;
    for (size_t i = 0; i < a.ranges.size(); ++i)
      if (a.ranges[i].lo != b.ranges[i].lo || a.ranges[i].hi != b.ranges[i].hi) return false;
    for (size_t i = 0; i < a.items.size(); ++i)
      if (!same(*a.items[i], *b.items[i])) return false;
    return true;
  }
  // A sequence whose items are all z or repetitions of z is z{sum of mins, sum of maxes}, exactly
  // (counts of z add). As a repetition it can merge with one around it: (.?.?.?.?){0,997} is
  // .{0,3988}, one stack per count. Kept as a sequence, the ways to place each character among the
  // groups and their optional items went past the matcher's bound on a step mid-output.
  // Only for a z that cannot be empty: z{42,} of a z that can (((a?b?)(a?b?){5,}){7} under a
  // repetition) has far more stacks than the groups as written once its non-empty form is taken.
  bool seq_as_repeat(const Expr& s, Flat& z) {
    if (s.kind != Expr::Kind::Seq || s.items.size() < 2) return false;
    const Expr* atom = nullptr;
    long lo = 0, hi = 0;
    for (const auto& item : s.items) {
      const Flat f = flat(*item, 1, 1);
      if (atom != nullptr && !same(*atom, *f.x)) return false;
      atom = f.x;
      lo += f.min;
      hi = hi < 0 || f.max < 0 ? -1 : hi + f.max;
      if (lo > kMaxSeqMerge || hi > kMaxSeqMerge) return false;
    }
    if (may_be_empty(*atom)) return false;
    z = {atom, lo, hi, true};
    return true;
  }
  // Whether e can match the empty string; a rule reference is assumed to (not known here).
  static bool may_be_empty(const Expr& e) {
    switch (e.kind) {
      case Expr::Kind::Chars:
        return false;
      case Expr::Kind::RuleRef:
        return true;
      case Expr::Kind::Repeat:
        return e.min == 0 || may_be_empty(*e.items[0]);
      case Expr::Kind::Seq:
        return std::all_of(e.items.begin(), e.items.end(), [](const ExprPtr& i) { return may_be_empty(*i); });
      case Expr::Kind::Alt:
        return e.items.empty() ||
               std::any_of(e.items.begin(), e.items.end(), [](const ExprPtr& i) { return may_be_empty(*i); });
    }
    return true;
  }

  void lower_repeat(const Expr& e, Alt& out) {
    const Flat f = flat(*e.items[0], e.min, e.max);
    Alt one;
    lower_seq(*f.x, one);
    Elem x = one.size() == 1 ? one[0] : Elem{Elem::Rule, helper({one})};
    if (one.empty()) return;  // repeating nothing matches nothing more
    for (long i = 0; i < f.min; ++i) out.push_back(x);
    if (f.max < 0) {
      const int32_t r = new_rule(current_ + "-" + std::to_string(++helpers_));
      tmp_[size_t(r)] = {{x, {Elem::Rule, r}}, {}};
      repeats_.push_back(r);
      out.push_back({Elem::Rule, r});
      return;
    }
    int32_t tail = -1;  // optional chain: t_k ::= x t_{k-1} | empty
    std::vector<int32_t> chain;
    for (long i = 0; i < f.max - f.min; ++i) {
      Alt a{x};
      if (tail >= 0) a.push_back({Elem::Rule, tail});
      tail = helper({a, {}});
      chain.push_back(tail);
      repeats_.push_back(tail);
    }
    if (chain.size() >= 2) chains_.push_back({std::move(chain), x});
    if (tail >= 0) out.push_back({Elem::Rule, tail});
  }

  void check_size() const {
    size_t elems = 0;
    for (size_t r = 0; r < tmp_.size(); ++r) {
      LL_CHECK(tmp_[r].size() <= kMaxAlternatives, "grammar: rule '{}' has {} alternatives, more than the limit of {}",
               g_.names_[r], tmp_[r].size(), kMaxAlternatives);
      for (const Alt& a : tmp_[r]) elems += a.size() + 1;
    }
    LL_CHECK(elems <= kMaxElements, "grammar: {} elements (characters, classes and rule references) once lowered, "
             "more than the limit of {}", elems, kMaxElements);
  }

  void flatten() {
    g_.rules_.resize(tmp_.size());
    for (size_t r = 0; r < tmp_.size(); ++r) {
      for (const Alt& a : tmp_[r]) {
        g_.rules_[r].push_back(int32_t(g_.elems_.size()));
        g_.elems_.insert(g_.elems_.end(), a.begin(), a.end());
        g_.elems_.push_back({Elem::End, 0});
      }
    }
  }

  // Which rules derive the empty string: a worklist over each alternative's count of elements not
  // yet known to derive it, linear in the grammar's size (a fixed point by passes took a pass per
  // rule of a long chain).
  void compute_nullable() {
    const size_t n = tmp_.size();
    nullable_.assign(n, false);
    std::vector<std::vector<int32_t>> users(n);  // rule -> the alternatives (slots) it appears in
    std::vector<int32_t> need, owner, queue;
    for (size_t r = 0; r < n; ++r)
      for (const Alt& a : tmp_[r]) {
        if (std::any_of(a.begin(), a.end(), [](const Elem& e) { return e.kind == Elem::Bytes; })) continue;
        const auto slot = int32_t(need.size());
        need.push_back(int32_t(a.size()));
        owner.push_back(int32_t(r));
        for (const Elem& e : a) users[size_t(e.arg)].push_back(slot);
        if (a.empty() && !nullable_[r]) nullable_[r] = true, queue.push_back(int32_t(r));
      }
    while (!queue.empty()) {
      const int32_t c = queue.back();
      queue.pop_back();
      for (const int32_t slot : users[size_t(c)]) {
        const auto r = size_t(owner[size_t(slot)]);
        if (--need[size_t(slot)] == 0 && !nullable_[r]) nullable_[r] = true, queue.push_back(int32_t(r));
      }
    }
  }

  // A repeated item that can be empty, x in x* or x{m,n}, would make x* left-recursive (its
  // rule r ::= x r reaches r without a byte) and every count ambiguous. Its repetition rules take
  // x's non-empty part instead, which leaves the language as it was: x^m x* = (x+)*, and
  // x^m x{0,n-m} = x^m (x+){0,n-m}, where x+ is x without the empty string. Every repetition is
  // rewritten before any x+ is filled in, so that x+ of x ::= y* copies y*'s rule rewritten
  // (copied first, it had y*'s rule reach itself through y+).
  void repeat_nonempty() {
    for (const int32_t r : repeats_) {
      const Elem x = tmp_[size_t(r)][0][0];
      if (x.kind != Elem::Rule || !nullable_[size_t(x.arg)]) continue;
      const int32_t p = nonempty_id(x.arg);  // appends to tmp_: no reference into it across the call
      tmp_[size_t(r)][0][0] = {Elem::Rule, p};
    }
    for (auto& [rules, x] : chains_)
      if (x.kind == Elem::Rule && nullable_[size_t(x.arg)]) x = {Elem::Rule, nonempty_id(x.arg)};
    // A worklist, not recursion: a chain of 20,000 rules that can be empty overflowed the stack.
    for (size_t i = 0; i < nonempty_todo_.size(); ++i) fill_nonempty(nonempty_todo_[i]);
  }
  // The rule for x+ (filled in by fill_nonempty).
  int32_t nonempty_id(int32_t r) {
    auto [it, fresh] = nonempty_.try_emplace(r, 0);
    if (fresh) {
      it->second = new_rule(g_.names_[size_t(r)] + "-nonempty");
      nullable_.push_back(false);
      nonempty_todo_.push_back(r);
    }
    return it->second;
  }
  // Rule r without the empty string: for each alternative e_1 .. e_k and each i whose e_1 ..
  // e_{i-1} can all be empty, e_i's non-empty part followed by e_{i+1} .. e_k. An alternative that
  // would be the rule itself alone (X ::= A | X) adds nothing and is left out.
  void fill_nonempty(int32_t r) {
    const int32_t p = nonempty_.at(r);
    const Alts src = tmp_[size_t(r)];  // a copy: nonempty_id() appends to tmp_
    Alts alts;
    for (const Alt& a : src)
      for (size_t i = 0; i < a.size(); ++i) {
        const Elem& e = a[i];
        const bool can_be_empty = e.kind == Elem::Rule && nullable_[size_t(e.arg)];
        const Elem head = can_be_empty ? Elem{Elem::Rule, nonempty_id(e.arg)} : e;
        if (!(head.kind == Elem::Rule && head.arg == p && i + 1 == a.size())) {
          Alt alt{head};
          alt.insert(alt.end(), a.begin() + long(i) + 1, a.end());
          alts.push_back(std::move(alt));
        }
        if (!can_be_empty) break;
      }
    tmp_[size_t(p)] = std::move(alts);
  }

  // The matcher expands rule references eagerly, so a rule reachable from itself without
  // consuming a byte would loop: reject it here with its name. An explicit stack: a chain of
  // 100,000 rules overflowed the call stack.
  void check_left_recursion() {
    const size_t n = tmp_.size();
    std::vector<uint8_t> state(n, 0);  // 0 new, 1 on the path, 2 done
    struct Frame {
      size_t r, alt, elem;
    };
    std::vector<Frame> path;
    for (size_t start = 0; start < n; ++start) {
      if (state[start] != 0) continue;
      state[start] = 1;
      path.push_back({start, 0, 0});
      while (!path.empty()) {
        Frame& f = path.back();
        if (f.alt == tmp_[f.r].size()) {
          state[f.r] = 2;
          path.pop_back();
          continue;
        }
        const Alt& a = tmp_[f.r][f.alt];
        if (f.elem == a.size() || a[f.elem].kind == Elem::Bytes) {
          ++f.alt, f.elem = 0;
          continue;
        }
        const auto c = size_t(a[f.elem].arg);
        if (nullable_[c])
          ++f.elem;  // the next element is reached without a byte too
        else
          ++f.alt, f.elem = 0;
        LL_CHECK(state[c] != 1, "grammar: rule '{}' is left-recursive", g_.names_[c]);
        if (state[c] == 0) state[c] = 1, path.push_back({c, 0, 0});  // f is not used after this
      }
    }
  }

  // x in t_j (the first element of t_j's first alternative) maps to x in t_n, the longest.
  void mark_chains() {
    g_.chain_.resize(g_.elems_.size());
    if (chains_.empty()) return;
    // The bytes each rule may start with: a worklist along the rules' leading references (a set
    // only grows, so each rule is taken again at most 256 times).
    const size_t n = tmp_.size();
    std::vector<ByteSet> first(n);
    std::vector<std::vector<int32_t>> leads_to(n);  // rule -> the rules that may start with it
    std::vector<int32_t> queue;
    for (size_t r = 0; r < n; ++r)
      for (const Alt& a : tmp_[r])
        for (const Elem& e : a) {
          if (e.kind == Elem::Bytes) {
            first[r] |= g_.byte_sets_[size_t(e.arg)];
            break;
          }
          leads_to[size_t(e.arg)].push_back(int32_t(r));
          if (!nullable_[size_t(e.arg)]) break;
        }
    for (size_t r = 0; r < n; ++r)
      if (first[r].any()) queue.push_back(int32_t(r));
    while (!queue.empty()) {
      const auto c = size_t(queue.back());
      queue.pop_back();
      for (const int32_t u : leads_to[c])
        if ((first[size_t(u)] | first[c]) != first[size_t(u)]) {
          first[size_t(u)] |= first[c];
          queue.push_back(u);
        }
    }
    for (const auto& [rules, x] : chains_) {
      if (x.kind == Elem::Rule && nullable_[size_t(x.arg)]) continue;  // a repetition may take no byte
      const int32_t canon = g_.rules_[size_t(rules.back())][0];
      const int32_t set = x.kind == Elem::Bytes ? x.arg : byte_set(first[size_t(x.arg)]);
      for (size_t j = 0; j < rules.size(); ++j)
        g_.chain_[size_t(g_.rules_[size_t(rules[j])][0])] = {canon, int32_t(j + 1), set};
    }
  }

  const std::vector<RuleDef>& defs_;
  Grammar g_;
  std::vector<std::pair<std::vector<int32_t>, Elem>> chains_;  // t_1..t_n of each x{m,n}, and x
  std::vector<int32_t> repeats_;  // rules whose first alternative starts with a repeated item
  std::map<int32_t, int32_t> nonempty_;  // rule -> its non-empty part
  std::vector<int32_t> nonempty_todo_;   // rules whose non-empty part is still to fill in
  std::vector<bool> nullable_;
  std::vector<Alts> tmp_;
  std::map<std::string, int32_t> ids_, class_rules_;
  std::unordered_map<ByteSet, int32_t> set_ids_;
  std::string current_;
  int helpers_ = 0;
};

Grammar Grammar::build(const std::vector<RuleDef>& rules, const std::string& root) {
  return Lowering(rules).run(root);
}

}  // namespace lite_llama::grammar

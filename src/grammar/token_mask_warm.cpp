// CompiledGrammar::warm(): the token-mask entries built ahead of decode, as XGrammar builds its
// adaptive mask cache when it compiles a grammar. Without it a fresh schema's first requests
// build ~1,300 entries (~0.2 s of one core for the benchmark schema) inside the engine's
// per-step mask fill, and single masks take up to ~10 ms against a ~2.6 ms device step.
//
// What fill_mask() looks up is decided by each stack's top frames (compute_mask / deepen), and
// the stacks a grammar can produce follow from its rules: the top is a byte-set position, each
// frame below it a rule reference that is not the last element of its alternative (a call in
// tail position pushes nothing, Matcher::expand), whose rule reaches the frame above's rule by
// tail calls. Enumerating those stacks level by level and running deepen() on each, exactly as
// compute_mask() would, builds the same entries decode would; a level stops where deepen()
// settles (few uncertain tokens) or the stack is whole (down to the root) or kMaxDepth deep.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <vector>

#include "core/thread_pool.h"
#include "grammar/token_mask.h"

namespace lite_llama::grammar {

namespace {

// For each rule, the frames that can sit right below a frame of that rule.
struct Callers {
  std::vector<int32_t> rule_of;               // per element: its rule
  std::vector<std::vector<int32_t>> callers;  // per rule: frame positions below its frames
  std::vector<uint8_t> from_root;             // per rule: its frames can be the stack's bottom
};

Callers find_callers(const Grammar& g) {
  const auto& elems = g.elems();
  const size_t nr = g.num_rules();
  Callers c;
  c.rule_of.assign(elems.size(), -1);
  std::vector<std::vector<int32_t>> tail(nr);  // per rule: rules it calls in tail position
  for (size_t r = 0; r < nr; ++r)
    for (int32_t a : g.alts(int32_t(r)))
      for (int32_t p = a; elems[size_t(p)].kind != Elem::End; ++p) {
        c.rule_of[size_t(p)] = int32_t(r);
        if (elems[size_t(p)].kind == Elem::Rule && elems[size_t(p) + 1].kind == Elem::End)
          tail[r].push_back(elems[size_t(p)].arg);
      }
  // The rules r's alternatives reach by tail calls, r included; `mark` is left all zero.
  std::vector<uint8_t> mark(nr, 0);
  auto reach = [&](int32_t r) {
    std::vector<int32_t> out{r};
    mark[size_t(r)] = 1;
    for (size_t i = 0; i < out.size(); ++i)
      for (int32_t y : tail[size_t(out[i])])
        if (!mark[size_t(y)]) mark[size_t(y)] = 1, out.push_back(y);
    for (int32_t x : out) mark[size_t(x)] = 0;
    return out;
  };
  c.callers.resize(nr);
  c.from_root.assign(nr, 0);
  for (int32_t r : reach(g.root())) c.from_root[size_t(r)] = 1;
  // Grouped by the rule called, one reach() each: a pass over every rule per call site was
  // quadratic (the n rules of x{0,n} each call x).
  std::vector<std::vector<int32_t>> sites(nr);
  for (size_t p = 0; p < elems.size(); ++p) {
    const Elem& e = elems[p];
    if (e.kind == Elem::Rule && elems[p + 1].kind != Elem::End) sites[size_t(e.arg)].push_back(int32_t(p));
  }  // tail calls push nothing
  std::vector<std::pair<int32_t, int32_t>> pairs;  // (rule, caller frame)
  for (size_t callee = 0; callee < nr; ++callee) {
    if (sites[callee].empty()) continue;
    for (int32_t r : reach(int32_t(callee)))
      for (int32_t p : sites[callee]) pairs.emplace_back(r, p);
  }
  // In position order per rule, as one pass over the elements listed them.
  std::sort(pairs.begin(), pairs.end());
  for (auto [r, p] : pairs) c.callers[size_t(r)].push_back(p);
  return c;
}

}  // namespace

WarmReport CompiledGrammar::warm(ThreadPool* pool, const WarmBudget& budget) const {
  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  const long entries0 = entries_.load(), bytes0 = entry_bytes_.load();
  const Callers callers = find_callers(grammar_);
  struct Node {
    std::vector<int32_t> stack;  // top first
    Level lv;                    // deepen() over all but the last frame
  };
  std::vector<Node> level, next;
  for (size_t p = 0; p < grammar_.elems().size(); ++p)
    if (grammar_.elems()[p].kind == Elem::Bytes && callers.rule_of[p] >= 0) level.push_back({{int32_t(p)}, {}});

  std::atomic<long> stacks{0}, queued{long(level.size())};
  std::atomic<bool> over{false};
  auto out_of_budget = [&] {
    if (over.load(std::memory_order_relaxed)) return true;
    const double ms = std::chrono::duration<double, std::milli>(clock::now() - t0).count();
    if (ms > budget.max_ms || entries_.load() - entries0 >= budget.max_entries ||
        entry_bytes_.load() - bytes0 >= budget.max_bytes ||
        (budget.cancel && budget.cancel->load(std::memory_order_relaxed)))
      over = true;
    return over.load();
  };
  std::mutex next_mu;
  for (size_t depth = 1; !level.empty() && !out_of_budget(); ++depth) {
    next.clear();
    std::atomic<size_t> at{0};
    auto work = [&](int, int) {
      std::vector<Node> mine;
      std::vector<int32_t> canon;
      for (size_t i; !out_of_budget() && (i = at.fetch_add(1)) < level.size();) {
        Node& n = level[i];
        stacks.fetch_add(1, std::memory_order_relaxed);
        canonical(n.stack, canon);
        const int32_t rule = callers.rule_of[size_t(n.stack.back())];
        if (callers.from_root[size_t(rule)]) {  // the whole stack, as a matcher from the root holds it
          Level lv = n.lv;
          deepen(lv, n.stack, canon, depth, true, true);
        }
        const auto& below = callers.callers[size_t(rule)];
        if (below.empty()) continue;
        // Deeper stacks: head_stack() shows at most kMaxDepth frames, the last as incomplete.
        Level lv = n.lv;
        if (deepen(lv, n.stack, canon, depth, false, depth == kMaxDepth) || depth == kMaxDepth) continue;
        if (queued.fetch_add(long(below.size())) + long(below.size()) > budget.max_stacks) {
          over = true;  // the enumeration alone would outgrow the budget
          break;
        }
        for (int32_t f : below) {
          Node child{n.stack, lv};
          child.stack.push_back(f);
          mine.push_back(std::move(child));
        }
      }
      std::lock_guard lock(next_mu);
      next.insert(next.end(), std::make_move_iterator(mine.begin()), std::make_move_iterator(mine.end()));
    };
    if (pool)
      pool->run(work);
    else
      work(0, 1);
    level.swap(next);
  }
  WarmReport r;
  r.finished = level.empty() && !over.load();
  // Every request's first mask is the start state's: a whole-mask cache hit from now on.
  if (!(budget.cancel && budget.cancel->load())) {
    Matcher m = matcher();
    std::vector<uint32_t> mask(vocab_->mask_words());
    fill_mask(m, mask.data());
  }
  r.stacks = stacks.load();
  r.entries = entries_.load() - entries0;
  r.ms = std::chrono::duration<double, std::milli>(clock::now() - t0).count();
  return r;
}

}  // namespace lite_llama::grammar

// Byte-level pushdown matcher over a flat Grammar. The state is the set of stacks that the
// input so far can be in; stacks are persistent (each node points to its parent, nodes are
// only appended), so accepting a byte pushes one frame and rollback pops frames. This is what
// makes walking a vocabulary trie cheap: a token shares every byte of its common prefix with
// the token before it.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "grammar/grammar.h"

namespace lite_llama::grammar {

class Matcher {
 public:
  // At the start of the grammar's root rule.
  explicit Matcher(const Grammar& g);
  // One stack of the given positions, top first (the top a byte set, the rest rule references
  // as head_stack() reports them) for the token mask precomputation (token_mask.h).
  // `complete`: the bottom frame is the root's, so the grammar may end there; otherwise whoever
  // called the bottom is unknown, and leaving its rule sets escaped() instead of continuing.
  static Matcher at_stack(const Grammar& g, const std::vector<int32_t>& top_down, bool complete);

  // Advances by one byte; false (state unchanged) when no stack accepts it.
  bool accept_byte(uint8_t b);
  // All bytes or none.
  bool accept_bytes(std::string_view s);
  // Undoes the last `n` accepted bytes (n <= history()).
  void rollback(size_t n);
  size_t history() const { return frames_.size() - 1; }
  // Forgets the history (no rollback past this point) and drops unreachable stack nodes.
  void commit();

  // The input so far is a complete sentence of the grammar.
  bool can_end() const { return frames_.back().can_end; }
  // Some stack left the bottom rule of an incomplete at_stack() matcher with the last byte.
  bool escaped() const { return frames_.back().escaped; }
  // The last accept_byte() (or the start) failed on the bounds of one step's work, not on the
  // byte: the grammar is too ambiguous for the matcher here.
  bool overflowed() const { return overflowed_; }
  // No byte can follow (the input may still be complete: see can_end()).
  bool stuck() const { return frames_.back().heads_begin == frames_.back().heads_end; }
  size_t num_heads() const { return frames_.back().heads_end - frames_.back().heads_begin; }
  // Positions of head i's stack from the top down, at most `max`; true when that is the whole
  // stack down to the root (false under an incomplete at_stack() start or past `max`).
  bool head_stack(size_t i, size_t max, std::vector<int32_t>& out) const;
  const Grammar& grammar() const { return *g_; }
  // A key equal for two matchers exactly when they accept the same continuations: the sorted
  // stacks (positions from top to bottom) and whether the input may end.
  void state_key(std::string& out) const;

 private:
  explicit Matcher(const Grammar* g) : g_(g) {}  // no stacks and no frames (at_stack)
  static constexpr int32_t kRoot = -1, kSentinel = -2;
  struct Node {
    int32_t pos, parent;
  };
  struct Frame {
    uint32_t heads_begin, heads_end, nodes_size;
    bool can_end, escaped;
  };
  void expand(int32_t pos, int32_t parent, Frame& f);
  void start_step();
  bool step_overflowed() const { return work_ > kMaxStepWork || overflow_; }

  // Bounds on one step's closure: a very ambiguous grammar (repetitions of repetitions nested
  // deep) has exponentially many stacks. Past these the step fails as if no stack accepted the
  // byte (the request ends with a grammar error) instead of exhausting time or the stack.
  static constexpr size_t kMaxStepWork = size_t(1) << 16;  // expand() calls
  static constexpr int kMaxDepth = 10000;                   // nested expand() calls
  bool seen(int32_t pos, int32_t parent);
  // Call nodes (the frames below the top) are hash-consed: one id per (pos, parent) among the
  // live nodes, so that two stacks equal in content below their tops are one parent id and
  // seen() merges them. Without it equal stacks made in different steps stayed apart: twice
  // the heads under ("a"{0,30} ","?){0,30}.
  // Rollback only truncates nodes_: a slot may then hold an id that is gone or reused by another
  // node (a lookup compares contents, so it is harmless); reindex() drops those when it grows.
  int32_t node(int32_t pos, int32_t parent);
  void reindex();  // the table of nodes_ alone, sized for more

  const Grammar* g_;
  std::vector<Node> nodes_;
  std::vector<int32_t> slots_;  // open addressing over nodes_ ids, -1 empty; at most half full
  size_t used_slots_ = 0;
  std::vector<int32_t> heads_;  // node ids of each frame's byte-set tops, frame after frame
  std::vector<Frame> frames_;
  std::vector<uint64_t> visited_;  // (pos, parent) expanded in the current step
  std::unordered_set<uint64_t> visited_more_;  // past kLinearVisited of them: searched by hash
  size_t work_ = 0;
  int depth_ = 0;
  bool overflow_ = false;
  bool overflowed_ = false;
};

}  // namespace lite_llama::grammar

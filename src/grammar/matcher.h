// Byte-level pushdown matcher over a flat Grammar. The state is the set of stacks that the
// input so far can be in; stacks are persistent (each node points to its parent, nodes are
// only appended), so accepting a byte pushes one frame and rollback pops frames. This is what
// makes walking a vocabulary trie cheap: a token shares every byte of its common prefix with
// the token before it.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "grammar/grammar.h"

namespace lite_llama::grammar {

class Matcher {
 public:
  // At the start of the grammar's root rule.
  explicit Matcher(const Grammar& g);
  // One stack at element `pos` (a byte set) of some rule whose caller is unknown: leaving that
  // rule sets escaped() instead of continuing (the token mask precomputation, token_mask.h).
  static Matcher at_position(const Grammar& g, int32_t pos);

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
  // Some stack left the start rule of an at_position() matcher with the last byte.
  bool escaped() const { return frames_.back().escaped; }
  // No byte can follow (the input may still be complete: see can_end()).
  bool stuck() const { return frames_.back().heads_begin == frames_.back().heads_end; }
  // Distinct grammar positions (byte-set elements) at the tops of the current stacks.
  void head_positions(std::vector<int32_t>& out) const;
  const Grammar& grammar() const { return *g_; }
  // A key equal for two matchers exactly when they accept the same continuations: the sorted
  // stacks (positions from top to bottom) and whether the input may end.
  void state_key(std::string& out) const;

 private:
  static constexpr int32_t kRoot = -1, kSentinel = -2;
  struct Node {
    int32_t pos, parent;
  };
  struct Frame {
    uint32_t heads_begin, heads_end, nodes_size;
    bool can_end, escaped;
  };
  void expand(int32_t pos, int32_t parent, Frame& f);
  bool seen(int32_t pos, int32_t parent);

  const Grammar* g_;
  std::vector<Node> nodes_;
  std::vector<int32_t> heads_;  // node ids of each frame's byte-set tops, frame after frame
  std::vector<Frame> frames_;
  std::vector<uint64_t> visited_;  // (pos, parent) expanded in the current step
};

}  // namespace lite_llama::grammar

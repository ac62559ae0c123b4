// The flat, byte-level grammar the matcher runs: each rule is a list of alternatives, each a
// sequence of elements that are either a set of bytes or a reference to a rule. Unicode
// classes become alternatives of UTF-8 byte-range sequences and repetition becomes
// right-recursive helper rules, so the matcher never sees code points or counters.
#pragma once
#include <bitset>
#include <cstdint>
#include <string>
#include <vector>

#include "grammar/ast.h"

namespace lite_llama::grammar {

using ByteSet = std::bitset<256>;

struct Elem {
  enum Kind : uint8_t { End, Bytes, Rule };
  Kind kind = End;
  int32_t arg = 0;  // Bytes: index into byte_sets; Rule: rule index
};

class Grammar {
 public:
  // Lowers parsed rules; `root` names the start rule. Throws lite_llama::Error for an undefined
  // rule, a left-recursive rule, or a class that matches nothing.
  static Grammar build(const std::vector<RuleDef>& rules, const std::string& root = "root");

  const std::vector<Elem>& elems() const { return elems_; }
  const std::vector<int32_t>& alts(int32_t rule) const { return rules_[size_t(rule)]; }
  const ByteSet& bytes(int32_t set) const { return byte_sets_[size_t(set)]; }
  size_t num_byte_sets() const { return byte_sets_.size(); }
  int32_t root() const { return root_; }
  size_t num_rules() const { return rules_.size(); }
  const std::string& rule_name(int32_t r) const { return names_[size_t(r)]; }

  // x{m,n} lowers to x m times and then t_k ::= x t_{k-1} | empty (k = n-m down to 1), with
  // x not nullable. For the position of x in t_j: the same position in the longest t, j, and
  // the bytes x may start with. A stack at x in t_j takes what the stack at the longest takes
  // for any input that cannot start j more repetitions: one whose bytes after the first (the
  // current repetition's) hold fewer than j of x's first bytes. The token masks share one
  // entry per chain this way.
  struct ChainPos {
    int32_t canon = -1, reps = 0;
    int32_t first = -1;  // byte set of the bytes x may start with
  };
  const ChainPos& chain(int32_t pos) const { return chain_[size_t(pos)]; }

 private:
  friend class Lowering;
  std::vector<Elem> elems_;                 // alternatives back to back, each ended by End
  std::vector<std::vector<int32_t>> rules_;  // per rule: start index of each alternative
  std::vector<std::string> names_;
  std::vector<ByteSet> byte_sets_;
  std::vector<ChainPos> chain_;  // per element; canon -1 outside chains
  int32_t root_ = 0;
};

}  // namespace lite_llama::grammar

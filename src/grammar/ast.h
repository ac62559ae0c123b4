// The grammar as written: expressions with alternatives, repetition and Unicode character
// classes, before lowering to the flat byte-level form the matcher runs (grammar.h).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>


namespace lite_llama::grammar {

// Inclusive code point range.
struct CodeRange {
  uint32_t lo = 0, hi = 0;
};

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind { Seq, Alt, Chars, RuleRef, Repeat };
  Kind kind = Kind::Seq;
  std::vector<ExprPtr> items;     // Seq / Alt: the parts; Repeat: the one repeated part
  std::vector<CodeRange> ranges;  // Chars: the class (already complemented when negated)
  std::string rule;               // RuleRef: the rule's name
  int min = 0, max = -1;          // Repeat: bounds, max -1 = unbounded

  static ExprPtr seq() { return make(Kind::Seq); }
  static ExprPtr alt() { return make(Kind::Alt); }
  static ExprPtr chars(std::vector<CodeRange> r);
  static ExprPtr ref(std::string name);
  static ExprPtr repeat(ExprPtr e, int min, int max);
  static ExprPtr literal(const std::string& utf8);  // a Seq of single code points
  static ExprPtr make(Kind k) {
    auto e = std::make_unique<Expr>();
    e->kind = k;
    return e;
  }
};

struct RuleDef {
  std::string name;
  ExprPtr body;
};

// Sorts, merges and (when `negate`) complements code point ranges over [0, 0x10FFFF].
std::vector<CodeRange> normalize_ranges(std::vector<CodeRange> r, bool negate);
// Decodes one UTF-8 code point at s[i], advancing i; invalid bytes decode as themselves.
uint32_t decode_utf8(const std::string& s, size_t& i);
void append_utf8(std::string& out, uint32_t cp);  // core/utf8.h's

}  // namespace lite_llama::grammar

// Regular expressions (the common subset: literals, escapes \d \w \s \D \W \S \n \t \xHH
// \uHHHH, classes, '.', groups (...) (?:...), '|', * + ? {m} {m,} {m,n}, lazy suffixes, and ^ $
// at the ends) to a GBNF expression. Backreferences, lookaround and other constructs that a
// context-free grammar cannot or need not express are an error naming them.
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "grammar/ast.h"

namespace lite_llama::grammar {

struct RegexOptions {
  // Inside a JSON string: the text must stay a valid JSON string body, so '"', '\' and control
  // characters are written escaped and classes never produce them raw.
  bool json_string = false;
  // Search semantics (JSON Schema "pattern"): unless anchored with ^ / $, anything may come
  // before / after the match.
  bool search = false;
};

// Throws lite_llama::Error "regex: ..." naming the unsupported construct or syntax error.
std::string regex_to_gbnf(std::string_view re, const RegexOptions& opt = {});
// A full grammar (root rule) matching exactly the regex.
std::string regex_grammar(std::string_view re);

// GBNF text of a character class over code point ranges.
std::string gbnf_class(const std::vector<CodeRange>& ranges);

}  // namespace lite_llama::grammar

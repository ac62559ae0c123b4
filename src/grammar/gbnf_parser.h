// Parser of llama.cpp's GBNF grammar syntax:
//   root  ::= "{" ws pair ("," ws pair)* "}"   # comments
//   ws    ::= [ \t\n]*
// Literals "..." and classes [a-z] / [^...] with \n \t \r \\ \" \] \xHH \uHHHH \UHHHHHHHH
// escapes, '.', groups, '|', and the postfixes * + ? {m} {m,} {m,n}. A rule ends at a newline
// outside parentheses.
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "grammar/ast.h"
#include "grammar/grammar.h"

namespace lite_llama::grammar {

// Throws lite_llama::Error "grammar: line L col C: ..." on the first syntax error.
std::vector<RuleDef> parse_gbnf(std::string_view text);
// parse_gbnf + Grammar::build with the start rule "root".
Grammar compile_gbnf(std::string_view text);

// Escapes a string as the inside of a GBNF literal.
std::string gbnf_escape(std::string_view s);

}  // namespace lite_llama::grammar

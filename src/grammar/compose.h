// Building grammars out of grammars, as GBNF text.
#pragma once
#include <string>
#include <string_view>

namespace lite_llama::grammar {

// Renames rule `from` to `to` everywhere in a GBNF text (definitions and references; literals,
// classes and comments untouched).
std::string rename_rule(std::string_view gbnf, const std::string& from, const std::string& to);

// The answer grammar behind an optional <think>...</think> block (any text without
// "</think>"), so that a reasoning model may think before its constrained answer. in_think:
// the prompt already opened the block; the output starts inside it.
std::string after_think(std::string_view answer_gbnf, bool in_think);

}  // namespace lite_llama::grammar

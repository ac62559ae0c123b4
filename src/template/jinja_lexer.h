// Lexer of the Jinja-subset chat template engine. Whitespace control is resolved here, exactly as
// jinja2's lexer does it with trim_blocks=True and lstrip_blocks=True (transformers' settings):
// `{%-`/`-%}` strip all whitespace, a block or comment tag eats the newline after it, and the
// indentation before a block or comment tag that starts a line is dropped.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace lite_llama::jinja {

enum class TokType {
  kText,
  kVarBegin,
  kVarEnd,
  kBlockBegin,
  kBlockEnd,
  kName,
  kString,
  kInt,
  kFloat,
  kOp,
  kEof
};

struct Token {
  TokType type = TokType::kEof;
  std::string text;  // text data, name, decoded string literal or operator
  int64_t ival = 0;
  double fval = 0.0;
  int line = 1;
  int col = 1;
};

std::vector<Token> tokenize(std::string_view source);

// Throws lite_llama::Error "chat template line L column C: msg".
[[noreturn]] void syntax_error(int line, int col, const std::string& msg);

}  // namespace lite_llama::jinja

// Public: grammars for SamplingParams::grammar (GBNF text) from the usual constraint kinds.
// Each throws lite_llama::Error naming what it cannot express (an unsupported JSON Schema
// keyword, a regex backreference, a GBNF syntax error with its line and column).
#pragma once
#include <string>
#include <vector>

namespace lite_llama {

std::string json_schema_grammar(const std::string& schema_json);  // {"type": ...} as JSON text
std::string json_object_grammar();                                // any JSON object
std::string regex_grammar(const std::string& regex);
std::string choice_grammar(const std::vector<std::string>& choices);
void check_grammar(const std::string& gbnf);

}  // namespace lite_llama

// The public structured-output helpers (include/lite_llama/structured_output.h) over src/grammar.
#include "lite_llama/structured_output.h"

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "grammar/gbnf_parser.h"
#include "grammar/json_schema.h"
#include "grammar/regex_to_gbnf.h"

namespace lite_llama {

std::string json_schema_grammar(const std::string& schema_json) {
  const auto j = nlohmann::ordered_json::parse(schema_json, nullptr, false);
  LL_CHECK(!j.is_discarded(), "json schema: not valid JSON");
  std::string g = grammar::json_schema_to_gbnf(j);
  grammar::compile_gbnf(g);
  return g;
}

std::string json_object_grammar() { return grammar::json_object_gbnf(); }

std::string regex_grammar(const std::string& regex) {
  std::string g = grammar::regex_grammar(regex);
  grammar::compile_gbnf(g);
  return g;
}

std::string choice_grammar(const std::vector<std::string>& choices) {
  LL_CHECK(!choices.empty(), "choices: the list is empty");
  std::string g = "root ::= ";
  for (size_t i = 0; i < choices.size(); ++i) g += (i ? " | \"" : "\"") + grammar::gbnf_escape(choices[i]) + "\"";
  return g + "\n";
}

void check_grammar(const std::string& gbnf) { grammar::compile_gbnf(gbnf); }

}  // namespace lite_llama

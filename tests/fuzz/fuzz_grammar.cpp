// libFuzzer target for the grammar front ends: the first byte picks GBNF, JSON Schema or regex,
// the rest is the text. Compiling must succeed or throw lite_llama::Error (never crash, hang or
// throw anything else); a compiled grammar then runs the matcher over the same bytes with
// rollbacks, and its token masks over a small vocabulary.
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/error.h"
#include "grammar/gbnf_parser.h"
#include "grammar/json_schema.h"
#include "grammar/regex_to_gbnf.h"
#include "grammar/token_mask.h"

using namespace lite_llama;
using namespace lite_llama::grammar;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0 || size > 4096) return 0;
  const std::string text(reinterpret_cast<const char*>(data + 1), size - 1);
  std::string gbnf;
  try {
    switch (data[0] % 3) {
      case 0: gbnf = text; break;
      case 1: {
        const auto j = nlohmann::ordered_json::parse(text, nullptr, false);
        if (j.is_discarded()) return 0;
        gbnf = json_schema_to_gbnf(j);
        break;
      }
      default: gbnf = regex_grammar(text); break;
    }
    static const auto vocab = [] {
      std::vector<std::string> v{""};
      for (int b = 0; b < 256; ++b) v.push_back(std::string(1, char(b)));
      for (const char* s : {"{\"", "\":", "ab", "\"}", "true", "12", " \""}) v.push_back(s);
      return std::make_shared<TokenVocab>(v, std::vector<int32_t>{0});
    }();
    CompiledGrammar cg(compile_gbnf(gbnf), vocab);
    Matcher m = cg.matcher();
    std::vector<uint32_t> mask(vocab->mask_words());
    for (size_t i = 1; i < size && i < 64; ++i) {
      cg.fill_mask(m, mask.data());
      if (!m.accept_byte(data[i])) m.rollback(data[i] % 3);
    }
  } catch (const Error&) {
  }
  return 0;
}

// Grammar masks over the default model's real vocabulary (49k byte-level BPE tokens): the
// cached mask equals the plain definition (token allowed iff the matcher takes all its bytes;
// stop tokens iff the output may end) along a JSON output, and the tokens the model would write
// for a valid output are each allowed in turn.
#include <gtest/gtest.h>

#include <chrono>

#include "common/default_model.h"
#include "engine/grammar_cache.h"
#include "grammar/json_schema.h"
#include "io/gguf.h"
#include "common/brute_force_mask.h"

using namespace lite_llama;

namespace {

std::vector<uint32_t> brute_force(grammar::Matcher& m, const grammar::TokenVocab& v) { return lite_llama::test_util::brute_force_mask(m, v); }

}  // namespace

TEST(GrammarCache, RealVocabularyMasksMatchDefinition) {
  LL_REQUIRE_DEFAULT_MODEL();
  auto f = gguf::File::open(lite_llama::testing::default_model_path());
  auto tok = Tokenizer::from_gguf(*f);
  GrammarCache cache(*tok, tok->vocab_size());
  const auto schema = nlohmann::ordered_json::parse(R"({"type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer", "minimum": 0},
                   "tags": {"type": "array", "items": {"enum": ["x", "y"]}}},
    "required": ["name", "age", "tags"], "additionalProperties": false})");
  auto g = cache.get(grammar::json_schema_to_gbnf(schema));
  EXPECT_EQ(cache.get(grammar::json_schema_to_gbnf(schema)).get(), g.get());  // compiled once

  const std::string output = "{\"name\": \"Zoë said \\\"hi\\\"\", \"age\": 42, \"tags\": [\"x\", \"y\"]}";
  const std::vector<int32_t> ids = tok->encode(output, false, false);
  grammar::Matcher m = g->matcher();
  std::vector<uint32_t> mask(g->vocab().mask_words());
  double ms = 0;
  for (size_t i = 0; i <= ids.size(); ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    g->fill_mask(m, mask.data());
    ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (i % 4 == 0 || i == ids.size()) {
      ASSERT_EQ(mask, brute_force(m, g->vocab())) << "step " << i;
    }
    if (i == ids.size()) break;
    ASSERT_TRUE((mask[size_t(ids[i]) / 32] >> (ids[i] % 32)) & 1u) << "token " << i << " '" << tok->token_bytes(ids[i]) << "'";
    ASSERT_TRUE(m.accept_bytes(tok->token_bytes(ids[i])));
    m.commit();
  }
  EXPECT_TRUE(m.can_end());
  const int32_t eos = tok->stop_ids().at(0);
  EXPECT_TRUE((mask[size_t(eos) / 32] >> (eos % 32)) & 1u);
  // The same output again: every position's cache entry exists, only the uncertain tokens walk.
  grammar::Matcher again = g->matcher();
  const auto t0 = std::chrono::steady_clock::now();
  for (int32_t id : ids) {
    g->fill_mask(again, mask.data());
    again.accept_bytes(tok->token_bytes(id));
    again.commit();
  }
  const double warm = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  std::printf("%zu masks: %.1f ms cold (cache filling), %.2f ms per mask warm\n", ids.size() + 1, ms,
              warm / double(ids.size()));
}

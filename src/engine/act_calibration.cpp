#include "engine/act_calibration.h"

#include <algorithm>
#include <numeric>

#include "model/forward_batch.h"
#include "model/kv_cache.h"

namespace lite_llama {
namespace {

// Prose, code, numbers and markup: the kinds of text whose activations differ most.
constexpr const char* kCalibrationText =
    "The quick brown fox jumps over the lazy dog. In 1969, Apollo 11 landed on the Moon; "
    "Neil Armstrong stepped out at 02:56 UTC.\n\n"
    "def fib(n):\n    return n if n < 2 else fib(n - 1) + fib(n - 2)\n\n"
    "| year | revenue ($M) |\n| 2023 | 1,024.5 |\n| 2024 | 2,048.75 |\n"
    "{\"name\": \"Ada\", \"tags\": [\"math\", \"engines\"], \"score\": -3.14e+2}\n"
    "Das ist ein kurzer Satz auf Deutsch. 这是一个中文句子。 Ceci est une phrase.";

}  // namespace

double calibration_activation_range(Decoder& decoder, const Tokenizer& tokenizer) {
  std::vector<int32_t> ids = tokenizer.encode(kCalibrationText, true, false);
  const KvCache* kv = decoder.kv_cache();
  const int64_t limit = std::min<int64_t>({int64_t(decoder.max_tokens()), kv->num_slots(), kv->max_ctx()});
  ids.resize(size_t(std::min<int64_t>(int64_t(ids.size()), limit)));
  const int64_t vocab = decoder.config().vocab_size;
  for (int32_t& t : ids) t = int32_t(std::min<int64_t>(t, vocab - 1));  // dummy models: smaller vocab
  std::vector<int32_t> slots(ids.size());
  std::iota(slots.begin(), slots.end(), 0);
  ForwardBatch b;
  b.add_sequence(0, ids.data(), int(ids.size()), 0, slots.data(), true);
  ops::Backend& be = decoder.backend();
  be.probe_activation_range(true);
  decoder.run(decoder.stage(b));
  be.synchronize();
  const double range = be.probed_activation_range();
  be.probe_activation_range(false);
  return range;
}

}  // namespace lite_llama

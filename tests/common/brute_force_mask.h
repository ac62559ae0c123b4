// The plain definition of a token mask, the reference for the cached masks: a token is allowed
// exactly when the matcher accepts all its bytes, a stop token when the output may end.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "grammar/matcher.h"
#include "grammar/token_mask.h"

namespace lite_llama::test_util {

inline std::vector<uint32_t> brute_force_mask(grammar::Matcher& m, const grammar::TokenVocab& v) {
  std::vector<uint32_t> mask(v.mask_words(), 0);
  for (int32_t t = 0; t < v.size(); ++t) {
    const std::string& b = v.bytes(t);
    bool ok = false;
    if (!b.empty() && m.accept_bytes(b)) {
      ok = true;
      m.rollback(b.size());
    }
    for (int32_t s : v.stop_ids()) ok = ok || (s == t && m.can_end());
    if (ok) mask[size_t(t) / 32] |= 1u << (t % 32);
  }
  return mask;
}

}  // namespace lite_llama::test_util

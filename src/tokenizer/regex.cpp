#define PCRE2_CODE_UNIT_WIDTH 8
#include "tokenizer/regex.h"

#include <pcre2.h>

#include <memory>

#include "core/error.h"

namespace lite_llama {

namespace {

std::string pcre2_message(int code) {
  PCRE2_UCHAR buf[256];
  pcre2_get_error_message(code, buf, sizeof(buf));
  return reinterpret_cast<const char*>(buf);
}

struct MatchDataDeleter {
  void operator()(pcre2_match_data* m) const { pcre2_match_data_free(m); }
};

// One ovector pair suffices (no capture groups are read); reused per thread so that encode
// allocates nothing here.
pcre2_match_data* thread_match_data() {
  thread_local std::unique_ptr<pcre2_match_data, MatchDataDeleter> md(
      pcre2_match_data_create(1, nullptr));
  return md.get();
}

}  // namespace

Regex::Regex(std::string_view pattern, std::string_view what, bool literal) : what_(what) {
  int err = 0;
  PCRE2_SIZE err_off = 0;
  // MATCH_INVALID_UTF: arbitrary bytes may come in; invalid sequences simply never match.
  // (UCP means nothing to plain text, and PCRE2 refuses it alongside LITERAL.)
  const uint32_t opts = PCRE2_UTF | PCRE2_MATCH_INVALID_UTF | (literal ? PCRE2_LITERAL : PCRE2_UCP);
  code_ = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), opts, &err,
                        &err_off, nullptr);
  LL_CHECK(code_, "{}: regex does not compile at offset {}: {}", what_, err_off,
           pcre2_message(err));
  pcre2_jit_compile(code_, PCRE2_JIT_COMPLETE);  // the interpreter serves where JIT is absent
}

Regex::~Regex() { pcre2_code_free(code_); }

bool Regex::find(std::string_view text, size_t pos, size_t& start, size_t& end) const {
  pcre2_match_data* md = thread_match_data();
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  while (pos < text.size()) {
    int rc = pcre2_match(code_, subject, text.size(), pos, 0, md, nullptr);
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT) {
      // Pathological input for the JIT's fixed stack: the interpreter uses the heap instead.
      rc = pcre2_match(code_, subject, text.size(), pos, PCRE2_NO_JIT, md, nullptr);
    }
    if (rc == PCRE2_ERROR_NOMATCH) return false;
    LL_CHECK(rc >= 0, "{}: regex match failed: {}", what_, pcre2_message(rc));
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
    if (ov[1] > ov[0]) {
      start = ov[0];
      end = ov[1];
      return true;
    }
    // An empty match splits nothing: look again one character further on.
    pos = ov[0] + 1;
    while (pos < text.size() && (static_cast<uint8_t>(text[pos]) & 0xC0) == 0x80) ++pos;
  }
  return false;
}

}  // namespace lite_llama

#define PCRE2_CODE_UNIT_WIDTH 8
#include "tokenizer/pretokenizer.h"

#include <pcre2.h>

#include <algorithm>

#include "core/error.h"

namespace lite_llama {

namespace {

// The regexes as HF's tokenizer.json files spell them (Onig syntax, which PCRE2 reads the same
// way for these patterns). GPT-2's is also what ByteLevel(use_regex=True) applies.
constexpr const char* kGpt2 =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
// SmolLM / StarCoder: HF's Digits(individual_digits=True) ahead of the GPT-2 regex.
constexpr const char* kDigit = R"(\p{N})";
constexpr const char* kLlama3 =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// Qwen2: as Llama-3 but one digit per piece.
constexpr const char* kQwen2 =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

struct PreSpec {
  const char* name;
  std::vector<const char*> patterns;
  bool ignore_merges;
};

// Names as llama.cpp's convert script writes them into tokenizer.ggml.pre.
const std::vector<PreSpec>& pre_specs() {
  static const std::vector<PreSpec> specs = {
      {"default", {kGpt2}, false},         {"gpt2", {kGpt2}, false},
      {"smollm", {kDigit, kGpt2}, false},  {"starcoder", {kDigit, kGpt2}, false},
      {"refact", {kDigit, kGpt2}, false},  {"llama-bpe", {kLlama3}, true},
      {"llama3", {kLlama3}, true},         {"llama-v3", {kLlama3}, true},
      {"qwen2", {kQwen2}, false},          {"deepseek-r1-qwen", {kQwen2}, false},
  };
  return specs;
}

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

struct PreTokenizer::Stage {
  pcre2_code* code = nullptr;
  bool jit = false;
  ~Stage() { pcre2_code_free(code); }
};

std::vector<std::string> PreTokenizer::known_names() {
  std::vector<std::string> out;
  for (const auto& s : pre_specs()) out.emplace_back(s.name);
  return out;
}

std::unique_ptr<PreTokenizer> PreTokenizer::create(std::string_view name) {
  const auto& specs = pre_specs();
  auto it = std::find_if(specs.begin(), specs.end(),
                         [&](const PreSpec& s) { return name == s.name; });
  if (it == specs.end()) {
    std::string known;
    for (const auto& s : specs) known += (known.empty() ? "" : ", ") + std::string(s.name);
    fail("tokenizer.ggml.pre: unsupported pre-tokenizer '{}' (known: {})", name, known);
  }
  std::unique_ptr<PreTokenizer> pt(new PreTokenizer());
  pt->name_ = it->name;
  pt->ignore_merges_ = it->ignore_merges;
  for (const char* pattern : it->patterns) {
    auto st = std::make_unique<Stage>();
    int err = 0;
    PCRE2_SIZE err_off = 0;
    // MATCH_INVALID_UTF: arbitrary bytes may come in; invalid sequences simply never match.
    st->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern), PCRE2_ZERO_TERMINATED,
                             PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &err, &err_off,
                             nullptr);
    LL_CHECK(st->code, "pre-tokenizer '{}': regex does not compile at offset {}: {}", name,
             err_off, pcre2_message(err));
    st->jit = pcre2_jit_compile(st->code, PCRE2_JIT_COMPLETE) == 0;  // interpreter otherwise
    pt->stages_.push_back(std::move(st));
  }
  return pt;
}

PreTokenizer::~PreTokenizer() = default;

void PreTokenizer::split_stage(const Stage& st, std::string_view text,
                               std::vector<std::string_view>& out) const {
  pcre2_match_data* md = thread_match_data();
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t pos = 0, gap_start = 0;
  while (pos < text.size()) {
    int rc = pcre2_match(st.code, subject, text.size(), pos, 0, md, nullptr);
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT) {
      // Pathological input for the JIT's fixed stack: the interpreter uses the heap instead.
      rc = pcre2_match(st.code, subject, text.size(), pos, PCRE2_NO_JIT, md, nullptr);
    }
    if (rc == PCRE2_ERROR_NOMATCH) break;
    LL_CHECK(rc >= 0, "pre-tokenizer '{}': regex match failed: {}", name_, pcre2_message(rc));
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
    const size_t start = ov[0], end = ov[1];
    if (end == start) {  // none of the patterns can match empty; guard against looping anyway
      pos = start + 1;
      while (pos < text.size() && (static_cast<uint8_t>(text[pos]) & 0xC0) == 0x80) ++pos;
      continue;
    }
    if (start > gap_start) out.push_back(text.substr(gap_start, start - gap_start));
    out.push_back(text.substr(start, end - start));
    gap_start = pos = end;
  }
  if (gap_start < text.size()) out.push_back(text.substr(gap_start));
}

void PreTokenizer::split(std::string_view text, std::vector<std::string_view>& out) const {
  if (text.empty()) return;
  if (stages_.size() == 1) {
    split_stage(*stages_[0], text, out);
    return;
  }
  std::vector<std::string_view> cur{text}, next;
  for (size_t s = 0; s < stages_.size(); ++s) {
    auto& dst = s + 1 == stages_.size() ? out : next;
    if (&dst == &next) next.clear();
    for (auto piece : cur) split_stage(*stages_[s], piece, dst);
    if (&dst == &next) std::swap(cur, next);
  }
}

}  // namespace lite_llama

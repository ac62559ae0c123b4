#include "tokenizer/pretokenizer.h"

#include <algorithm>

#include "core/error.h"
#include "tokenizer/regex.h"

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

}  // namespace

struct PreTokenizer::Stage {
  explicit Stage(std::string_view pattern, std::string_view what) : re(pattern, what) {}
  Regex re;
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
    pt->stages_.push_back(std::make_unique<Stage>(pattern, "pre-tokenizer '" + pt->name_ + "'"));
  }
  return pt;
}

PreTokenizer::~PreTokenizer() = default;

void PreTokenizer::split_stage(const Stage& st, std::string_view text,
                               std::vector<std::string_view>& out) const {
  size_t pos = 0, gap_start = 0, start = 0, end = 0;
  while (st.re.find(text, pos, start, end)) {
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

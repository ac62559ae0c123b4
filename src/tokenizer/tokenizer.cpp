// Tokenizer factories: GGUF metadata (tokenizer.ggml.*) -> BpeVocab -> BpeTokenizer.
#include <algorithm>
#include <limits>

#include "core/error.h"
#include "io/gguf.h"
#include "tokenizer/bpe_tokenizer.h"

namespace lite_llama {

namespace {

std::vector<std::string> string_array(const gguf::File& f, std::string_view key) {
  const gguf::Value* v = f.find(key);
  LL_CHECK(v, "{}: missing metadata key '{}' (needed by the tokenizer)", f.path(), key);
  const auto& arr = v->as_array(key);
  LL_CHECK(v->elem_type == gguf::ValueType::STRING || arr.empty(),
           "{}: metadata '{}' is an array of {}, expected strings", f.path(), key,
           gguf::value_type_name(v->elem_type));
  std::vector<std::string> out;
  out.reserve(arr.size());
  for (const auto& e : arr) out.push_back(e.as_string(key));
  return out;
}

// Optional token id; absent, negative or the 0xFFFFFFFF "none" marker all mean no token.
int32_t optional_id(const gguf::File& f, std::string_view key, int32_t n_tokens) {
  const gguf::Value* v = f.find(key);
  if (!v) return -1;
  LL_CHECK(v->is_int(), "{}: metadata '{}' has type {}, expected an integer", f.path(), key,
           gguf::value_type_name(v->type));
  if (auto* u = std::get_if<uint64_t>(&v->v)) {
    if (*u == std::numeric_limits<uint32_t>::max() || *u == std::numeric_limits<uint64_t>::max())
      return -1;
    LL_CHECK(*u < static_cast<uint64_t>(n_tokens), "{}: {} = {} is out of range (vocabulary of {})",
             f.path(), key, *u, n_tokens);
    return static_cast<int32_t>(*u);
  }
  const int64_t id = v->as_i64(key);
  if (id < 0) return -1;
  LL_CHECK(id < n_tokens, "{}: {} = {} is out of range (vocabulary of {})", f.path(), key, id,
           n_tokens);
  return static_cast<int32_t>(id);
}

std::vector<TokenType> token_types(const gguf::File& f, size_t n_tokens) {
  constexpr std::string_view key = "tokenizer.ggml.token_type";
  const gguf::Value* v = f.find(key);
  if (!v) return std::vector<TokenType>(n_tokens, TokenType::Normal);
  const auto& arr = v->as_array(key);
  LL_CHECK(arr.size() == n_tokens, "{}: {} has {} entries for {} tokens", f.path(), key,
           arr.size(), n_tokens);
  std::vector<TokenType> out(n_tokens);
  for (size_t i = 0; i < n_tokens; ++i) {
    const int64_t t = arr[i].as_i64(key);
    LL_CHECK(t >= 1 && t <= 6, "{}: {}[{}] = {} is not a token type (1..6)", f.path(), key, i, t);
    out[i] = static_cast<TokenType>(t);
  }
  return out;
}

}  // namespace

bool overlaps_any(std::span<const ByteRange> ranges, size_t begin, size_t end) {
  // The first range ending after `begin` is the only candidate.
  auto it = std::upper_bound(ranges.begin(), ranges.end(), begin,
                             [](size_t b, const ByteRange& r) { return b < r.end; });
  return it != ranges.end() && it->begin < end;
}

void Tokenizer::find_controls() const {
  std::call_once(control_once_, [&] {
    for (int32_t id = 0; id < vocab_size(); ++id)
      if (is_control(id) && !token_text(id).empty()) {
        control_trie_.add(token_text(id), int(control_texts_.size()));
        control_starts_.add(uint8_t(token_text(id)[0]));
        control_texts_.push_back(token_text(id));
      }
  });
}

const std::vector<std::string>& Tokenizer::control_texts() const {
  find_controls();
  return control_texts_;
}

const StringTrie& Tokenizer::control_trie() const {
  find_controls();
  return control_trie_;
}

const ByteSet& Tokenizer::control_starts() const {
  find_controls();
  return control_starts_;
}

std::string Tokenizer::bos_token() const { return bos_id() >= 0 ? token_text(bos_id()) : ""; }

std::string Tokenizer::eos_token() const { return eos_id() >= 0 ? token_text(eos_id()) : ""; }

std::unique_ptr<Tokenizer> Tokenizer::from_gguf(const gguf::File& f) {
  return from_gguf(f, TokenizerOptions{});
}

std::unique_ptr<Tokenizer> Tokenizer::from_gguf(const gguf::File& f, const TokenizerOptions& opts) {
  const gguf::Value* model = f.find("tokenizer.ggml.model");
  LL_CHECK(model, "{}: missing metadata key 'tokenizer.ggml.model'", f.path());
  const std::string& kind = model->as_string("tokenizer.ggml.model");
  LL_CHECK(kind == "gpt2",
           "{}: tokenizer.ggml.model = '{}' is not supported (only 'gpt2', byte-level BPE)",
           f.path(), kind);

  BpeVocab v;
  v.tokens = string_array(f, "tokenizer.ggml.tokens");
  LL_CHECK(!v.tokens.empty(), "{}: tokenizer.ggml.tokens is empty", f.path());
  LL_CHECK(v.tokens.size() < static_cast<size_t>(std::numeric_limits<int32_t>::max()),
           "{}: tokenizer.ggml.tokens has too many entries ({})", f.path(), v.tokens.size());
  const auto n = static_cast<int32_t>(v.tokens.size());
  v.types = token_types(f, v.tokens.size());
  v.merges = string_array(f, "tokenizer.ggml.merges");
  v.merges_key = f.path() + ": tokenizer.ggml.merges";
  // As llama.cpp: a GGUF without tokenizer.ggml.pre predates the key and gets GPT-2's regex.
  v.pre = opts.pre_override.empty() ? f.get_string("tokenizer.ggml.pre", "default")
                                    : opts.pre_override;
  v.bos = optional_id(f, "tokenizer.ggml.bos_token_id", n);
  v.eos = optional_id(f, "tokenizer.ggml.eos_token_id", n);
  v.eot = optional_id(f, "tokenizer.ggml.eot_token_id", n);
  v.pad = optional_id(f, "tokenizer.ggml.padding_token_id", n);
  v.unk = optional_id(f, "tokenizer.ggml.unknown_token_id", n);
  // Llama-3 checkpoints expect BOS even where the key is missing (llama.cpp's default too).
  const bool llama3 = v.pre == "llama-bpe" || v.pre == "llama3" || v.pre == "llama-v3";
  v.add_bos = f.get_bool("tokenizer.ggml.add_bos_token", llama3);
  LL_CHECK(!v.add_bos || v.bos >= 0,
           "{}: tokenizer.ggml.add_bos_token is set but tokenizer.ggml.bos_token_id is missing",
           f.path());
  // As llama.cpp: add_special also appends EOS when the key asks for it (default off for BPE).
  v.add_eos = f.get_bool("tokenizer.ggml.add_eos_token", false);
  LL_CHECK(!v.add_eos || v.eos >= 0,
           "{}: tokenizer.ggml.add_eos_token is set but tokenizer.ggml.eos_token_id is missing",
           f.path());
  v.chat_template = f.get_string("tokenizer.chat_template", "");
  return std::make_unique<BpeTokenizer>(std::move(v));
}

}  // namespace lite_llama

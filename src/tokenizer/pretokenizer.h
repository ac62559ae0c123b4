// Pre-tokenizer: splits text into the pieces BPE works on, with the regex cascade of a model
// family (HF `Split(..., behavior="isolated")` semantics: matches and the gaps between them are
// both pieces). Each stage runs on every piece of the previous one separately, so look-arounds
// such as `\s+(?!\S)` see the end of the piece, exactly as HF's pre-tokenizer sequence does.
#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace lite_llama {

class PreTokenizer {
 public:
  // `name` is a tokenizer.ggml.pre value; throws lite_llama::Error listing the known ones.
  static std::unique_ptr<PreTokenizer> create(std::string_view name);
  static std::vector<std::string> known_names();

  ~PreTokenizer();
  PreTokenizer(const PreTokenizer&) = delete;
  PreTokenizer& operator=(const PreTokenizer&) = delete;

  // Appends the pieces of `text` (views into it) to `out`. Invalid UTF-8 never matches a
  // pattern, so such bytes end up in gap pieces and still reach BPE.
  void split(std::string_view text, std::vector<std::string_view>& out) const;

  const std::string& name() const { return name_; }
  // Llama-3 vocabularies take a piece that is itself a token as is, before any merge.
  bool ignore_merges() const { return ignore_merges_; }

 private:
  struct Stage;
  PreTokenizer() = default;
  void split_stage(const Stage& st, std::string_view text,
                   std::vector<std::string_view>& out) const;

  std::string name_;
  bool ignore_merges_ = false;
  std::vector<std::unique_ptr<Stage>> stages_;
};

}  // namespace lite_llama

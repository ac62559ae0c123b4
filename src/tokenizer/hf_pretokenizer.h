// HF pre-tokenizers (tokenizer.json "pre_tokenizer"): Split (regex or literal, every split
// behaviour), ByteLevel (GPT-2 regex, prefix space), Digits, Metaspace and Sequence. Each step
// runs on every piece of the previous one, as HF's Sequence does.
//
// Pieces stay raw bytes: ByteLevel's byte -> symbol mapping happens inside BpeModel, so
// ByteLevel must be the last step (it is in every family supported).
#pragma once
#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/hf_json.h"

namespace lite_llama {

class Regex;

struct PrePiece {
  std::string_view text;
  // The piece starts where the input text started: Metaspace(prepend_scheme="first") adds its
  // "▁" only there, not after an added token.
  bool at_origin;
};

class HfPreTokenizer {
 public:
  // `j` is tokenizer.json's "pre_tokenizer" value; null gives a pass-through.
  static std::unique_ptr<HfPreTokenizer> from_json(const hfjson::json& j, const std::string& where);

  ~HfPreTokenizer();
  HfPreTokenizer(const HfPreTokenizer&) = delete;
  HfPreTokenizer& operator=(const HfPreTokenizer&) = delete;

  // Appends the non-empty pieces of `text`. Pieces point into `text` or, where a step rewrote
  // them (prefix space, "▁"), into strings kept in `arena`.
  void split(std::string_view text, bool at_origin, std::vector<PrePiece>& out,
             std::deque<std::string>& arena) const;

  // Ends with ByteLevel: the model sees bytes through GPT-2's byte -> character table.
  bool byte_level() const { return byte_level_; }

 private:
  enum class Kind { Split, ByteLevel, Metaspace };
  enum class Behavior { Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous };
  enum class Prepend { Always, First, Never };
  struct Step {
    Kind kind = Kind::Split;
    std::unique_ptr<Regex> regex;  // Split, Digits (as a Split) and ByteLevel's GPT-2 regex
    Behavior behavior = Behavior::Isolated;
    bool invert = false;
    bool add_prefix_space = false;  // ByteLevel
    std::string replacement;        // Metaspace
    Prepend prepend = Prepend::Always;
    bool split = true;              // Metaspace
  };
  HfPreTokenizer() = default;
  void parse(const hfjson::json& j, const std::string& where);
  void run_step(const Step& st, const PrePiece& in, std::vector<PrePiece>& out,
                std::deque<std::string>& arena) const;

  std::vector<Step> steps_;
  bool byte_level_ = false;
};

}  // namespace lite_llama

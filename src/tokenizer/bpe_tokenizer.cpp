#include "tokenizer/bpe_tokenizer.h"

#include <algorithm>

#include "core/error.h"
#include "tokenizer/unicode.h"

namespace lite_llama {

namespace {

bool is_parsed_special(TokenType t) {
  return t == TokenType::Control || t == TokenType::UserDefined;
}

}  // namespace

BpeTokenizer::BpeTokenizer(BpeVocab v)
    : bpe_(std::move(v.tokens), v.merges, v.merges_key),
      pre_(PreTokenizer::create(v.pre)),
      types_(std::move(v.types)),
      bos_(v.bos),
      eos_(v.eos),
      eot_(v.eot),
      pad_(v.pad),
      unk_(v.unk),
      add_bos_(v.add_bos),
      add_eos_(v.add_eos),
      chat_template_(std::move(v.chat_template)) {
  const int32_t n = bpe_.size();
  LL_CHECK(static_cast<int32_t>(types_.size()) == n,
           "tokenizer: {} token types for {} tokens", types_.size(), n);
  bytes_.resize(n);
  for (int32_t id = 0; id < n; ++id) {
    const std::string& text = bpe_.token(id);
    // Special tokens are stored verbatim (they are matched verbatim in the text); everything
    // else is in GPT-2's byte-symbol alphabet.
    bytes_[id] = is_parsed_special(types_[id]) || types_[id] == TokenType::Unknown ||
                         types_[id] == TokenType::Unused
                     ? text
                     : unicode::symbols_to_bytes(text);
    if (is_parsed_special(types_[id]) && !text.empty()) {
      // The longest match wins ("<|im_start|>" over a token that is its prefix); among
      // equal texts the lowest id, the first added.
      specials_.add(text, id);
      special_starts_.add(static_cast<uint8_t>(text[0]));
    }
  }
}

void BpeTokenizer::check_id(int32_t id) const {
  LL_CHECK(id >= 0 && id < bpe_.size(), "token id {} is out of range (vocabulary of {})", id,
           bpe_.size());
}

int32_t BpeTokenizer::match_special(std::string_view text, size_t pos) const {
  return specials_.longest_at(text, pos);
}

void BpeTokenizer::encode_plain(std::string_view text, std::vector<int32_t>& out) const {
  const bool cached = text.size() >= GapCache::kMinBytes;
  if (cached && gaps_.append(text, false, out)) return;
  const size_t from = out.size();
  thread_local std::vector<std::string_view> pieces;
  pieces.clear();
  pre_->split(text, pieces);
  for (auto piece : pieces) bpe_.encode_piece(piece, pre_->ignore_merges(), out);
  if (cached) gaps_.put(text, false, out.data() + from, out.size() - from);
}

std::vector<int32_t> BpeTokenizer::encode(std::string_view text, bool add_special,
                                          bool parse_special) const {
  return encode(text, add_special, parse_special, {});
}

std::vector<int32_t> BpeTokenizer::encode(std::string_view text, bool add_special,
                                          bool parse_special,
                                          std::span<const ByteRange> plain) const {
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 2);
  if (add_special && add_bos_ && bos_ >= 0) out.push_back(bos_);
  // Leftmost-longest scan, like HF's added-vocabulary matcher: the text between two special
  // tokens is pre-tokenised on its own, so no piece spans a special token. Without
  // parse_special only control tokens stay text: user-defined ones (Qwen3's <think>) still
  // match, as in llama.cpp and HF.
  size_t seg = 0;
  for (size_t i = special_starts_.find(text, 0); i < text.size(); i = special_starts_.find(text, i)) {
    const int32_t id = match_special(text, i);
    if (id < 0 || (types_[id] == TokenType::Control &&
                   (!parse_special ||
                    (!plain.empty() && overlaps_any(plain, i, i + bpe_.token(id).size()))))) {
      ++i;
      continue;
    }
    if (i > seg) encode_plain(text.substr(seg, i - seg), out);
    out.push_back(id);
    i += bpe_.token(id).size();
    seg = i;
  }
  if (seg < text.size()) encode_plain(text.substr(seg), out);
  if (add_special && add_eos_ && eos_ >= 0) out.push_back(eos_);
  return out;
}

std::string BpeTokenizer::decode(const std::vector<int32_t>& ids, bool skip_special) const {
  std::string out;
  for (int32_t id : ids) {
    check_id(id);
    if (skip_special && types_[id] == TokenType::Control) continue;
    out += bytes_[id];
  }
  return out;
}

std::string BpeTokenizer::token_bytes(int32_t id) const {
  check_id(id);
  return bytes_[id];
}

const std::string& BpeTokenizer::token_text(int32_t id) const {
  check_id(id);
  return bpe_.token(id);
}

bool BpeTokenizer::is_special(int32_t id) const {
  return id >= 0 && id < bpe_.size() && is_parsed_special(types_[id]);
}

bool BpeTokenizer::is_control(int32_t id) const {
  return id >= 0 && id < bpe_.size() && types_[id] == TokenType::Control;
}

std::vector<int32_t> BpeTokenizer::stop_ids() const {
  std::vector<int32_t> out;
  for (int32_t id : {eos_, eot_}) {
    if (id >= 0 && std::find(out.begin(), out.end(), id) == out.end()) out.push_back(id);
  }
  return out;
}

}  // namespace lite_llama

#include "tokenizer/hf_tokenizer.h"

#include <algorithm>
#include <deque>

#include "core/error.h"

namespace lite_llama {

namespace {

BpeModel make_bpe(HfTokenizerParts& p) {
  if (!p.merge_pairs.empty()) {
    return BpeModel(std::move(p.model_tokens), p.merge_pairs, p.merges_key);
  }
  return BpeModel(std::move(p.model_tokens), p.merges, p.merges_key);
}

}  // namespace

HfTokenizer::HfTokenizer(HfTokenizerParts p)
    : bpe_(make_bpe(p)),
      spm_(bpe_, p.model_opts),
      ignore_merges_(p.model_opts.ignore_merges),
      added_(std::move(p.added)),
      normalizer_(std::move(p.normalizer)),
      pre_(std::move(p.pre_tokenizer)),
      decoder_(std::move(p.decoder)),
      prefix_(std::move(p.prefix)),
      suffix_(std::move(p.suffix)),
      bos_(p.bos),
      eos_(p.eos),
      eot_(p.eot),
      pad_(p.pad),
      unk_(p.unk),
      chat_template_(std::move(p.chat_template)),
      extra_stops_(std::move(p.extra_stop_ids)) {
  int32_t n = bpe_.size();
  for (const AddedToken& t : added_) n = std::max(n, t.id + 1);
  texts_.resize(n);
  kind_.assign(n, kNone);
  for (int32_t id = 0; id < bpe_.size(); ++id) texts_[id] = bpe_.token(id);

  // Specials first, then the others, each in file order: the order HF builds its matchers in.
  std::vector<const AddedToken*> raw, normalized;
  std::vector<std::string> normalized_patterns;
  for (bool special : {true, false}) {
    for (const AddedToken& t : added_) {
      if (t.special != special) continue;
      if (t.normalized) {
        normalized.push_back(&t);
        // Matched in normalised text, so the pattern is normalised too (Prepend("▁") makes
        // "<s>" into "▁<s>", as in HF).
        normalized_patterns.push_back(normalizer_ ? normalizer_->apply(t.content) : t.content);
      } else {
        raw.push_back(&t);
      }
    }
  }
  for (const AddedToken& t : added_) {
    texts_[t.id] = t.content;
    kind_[t.id] = t.special ? kControl : kAdded;
    added_ids_[t.content] = t.id;
  }
  raw_matcher_ = AddedTokenMatcher(std::move(raw));
  normalized_matcher_ = AddedTokenMatcher(std::move(normalized), std::move(normalized_patterns));

  bytes_.resize(n);
  for (int32_t id = 0; id < n; ++id) {
    if (!texts_[id].empty()) bytes_[id] = decoder_->decode({texts_[id]}, /*whole_text=*/false);
  }
}

void HfTokenizer::check_id(int32_t id) const {
  LL_CHECK(id >= 0 && id < vocab_size(), "token id {} is out of range (vocabulary of {})", id,
           vocab_size());
}

void HfTokenizer::encode_normalized(std::string_view text, bool at_origin,
                                    std::vector<int32_t>& out) const {
  const bool cached = text.size() >= GapCache::kMinBytes;
  if (cached && gaps_.append(text, at_origin, out)) return;
  const size_t from = out.size();
  thread_local std::vector<PrePiece> pieces;
  thread_local std::deque<std::string> arena;
  pieces.clear();
  arena.clear();
  pre_->split(text, at_origin, pieces, arena);
  for (const PrePiece& piece : pieces) {
    if (pre_->byte_level()) bpe_.encode_piece(piece.text, ignore_merges_, out);
    else spm_.encode_piece(piece.text, out);
  }
  if (cached) gaps_.put(text, at_origin, out.data() + from, out.size() - from);
}

void HfTokenizer::encode_gap(std::string_view gap, bool at_origin, bool parse_special,
                             std::span<const ByteRange> plain,
                             std::vector<int32_t>& out) const {
  std::string normalized;
  if (normalizer_) {
    normalized = normalizer_->apply(gap);
    gap = normalized;
    // Offsets move with normalisation: a gap holding protected text matches no normalised
    // special token at all (such tokens are rare; raw-matched ones are exact).
    if (!plain.empty()) parse_special = false;
    plain = {};
  }
  if (normalized_matcher_.empty()) {
    encode_normalized(gap, at_origin, out);
    return;
  }
  std::vector<TextSegment> segs;
  normalized_matcher_.split(gap, parse_special, segs, plain);
  for (const TextSegment& s : segs) {
    if (s.id >= 0) out.push_back(s.id);
    else encode_normalized(gap.substr(s.start, s.end - s.start), at_origin && s.start == 0, out);
  }
}

std::vector<int32_t> HfTokenizer::encode(std::string_view text, bool add_special,
                                         bool parse_special) const {
  return encode(text, add_special, parse_special, {});
}

std::vector<int32_t> HfTokenizer::encode(std::string_view text, bool add_special,
                                         bool parse_special,
                                         std::span<const ByteRange> plain) const {
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + prefix_.size() + suffix_.size() + 1);
  if (add_special) out = prefix_;
  std::vector<TextSegment> segs;
  raw_matcher_.split(text, parse_special, segs, plain);
  std::vector<ByteRange> gap_plain;
  size_t k = 0;  // segments and ranges are both in text order
  for (const TextSegment& s : segs) {
    if (s.id >= 0) {
      out.push_back(s.id);
      continue;
    }
    gap_plain.clear();
    while (k < plain.size() && plain[k].end <= s.start) ++k;
    for (size_t j = k; j < plain.size() && plain[j].begin < s.end; ++j)
      gap_plain.push_back(
          {std::max(plain[j].begin, s.start) - s.start, std::min(plain[j].end, s.end) - s.start});
    encode_gap(text.substr(s.start, s.end - s.start), s.start == 0, parse_special, gap_plain, out);
  }
  if (add_special) out.insert(out.end(), suffix_.begin(), suffix_.end());
  return out;
}

std::string HfTokenizer::decode(const std::vector<int32_t>& ids, bool skip_special) const {
  std::vector<std::string> toks;
  toks.reserve(ids.size());
  for (int32_t id : ids) {
    check_id(id);
    // Ids the vocabulary leaves unused decode to nothing, as in HF.
    if (texts_[id].empty() || (skip_special && kind_[id] == kControl)) continue;
    toks.push_back(texts_[id]);
  }
  return decoder_->decode(std::move(toks), /*whole_text=*/true);
}

std::string HfTokenizer::token_bytes(int32_t id) const {
  check_id(id);
  return bytes_[id];
}

const std::string& HfTokenizer::token_text(int32_t id) const {
  check_id(id);
  return texts_[id];
}

int32_t HfTokenizer::token_id(std::string_view text) const {
  // Added tokens shadow the model's vocabulary, as in HF's token_to_id.
  if (auto it = added_ids_.find(std::string(text)); it != added_ids_.end()) return it->second;
  return text.empty() ? -1 : bpe_.find(text);
}

bool HfTokenizer::is_special(int32_t id) const {
  return id >= 0 && id < vocab_size() && kind_[id] != kNone;
}

bool HfTokenizer::is_control(int32_t id) const {
  return id >= 0 && id < vocab_size() && kind_[id] == kControl;
}

bool HfTokenizer::add_bos() const {
  return bos_ >= 0 && std::find(prefix_.begin(), prefix_.end(), bos_) != prefix_.end();
}

std::vector<int32_t> HfTokenizer::stop_ids() const {
  std::vector<int32_t> out;
  auto add = [&](int32_t id) {
    if (id >= 0 && std::find(out.begin(), out.end(), id) == out.end()) out.push_back(id);
  };
  add(eos_);
  add(eot_);
  for (int32_t id : extra_stops_) add(id);
  return out;
}

}  // namespace lite_llama

#include "tokenizer/sentencepiece_bpe.h"

#include <fmt/format.h>

#include <algorithm>

#include "tokenizer/unicode.h"

namespace lite_llama {

namespace {

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

int SentencePieceBpe::byte_value(std::string_view t) {
  if (t.size() != 6 || !t.starts_with("<0x") || t[5] != '>') return -1;
  const int hi = hex_digit(t[3]), lo = hex_digit(t[4]);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

SentencePieceBpe::SentencePieceBpe(const BpeModel& bpe, const SentencePieceOptions& opts)
    : bpe_(bpe), opts_(opts) {
  for (int b = 0; b < 256; ++b) byte_ids_[b] = bpe_.find(fmt::format("<0x{:02X}>", b));
}

void SentencePieceBpe::encode_piece(std::string_view piece, std::vector<int32_t>& out) const {
  if (piece.empty()) return;
  if (opts_.ignore_merges) {
    const int32_t id = bpe_.find(piece);
    if (id >= 0) {
      out.push_back(id);
      return;
    }
  }
  thread_local std::vector<int32_t> ids;
  ids.clear();
  bool pending_unk = false;  // an unknown run not yet emitted (fuse_unk)
  for (size_t i = 0; i < piece.size();) {
    uint32_t cp = 0;
    // An invalid byte is a "character" of its own: no token has it, so byte fallback takes it.
    const int n = std::max(unicode::decode_utf8(piece, i, cp), 1);
    const std::string_view ch = piece.substr(i, n);
    i += n;
    const int32_t id = bpe_.find(ch);
    if (id >= 0) {
      if (pending_unk) ids.push_back(opts_.unk);
      pending_unk = false;
      ids.push_back(id);
      continue;
    }
    if (opts_.byte_fallback) {
      bool all = true;
      for (char c : ch) all = all && byte_ids_[static_cast<uint8_t>(c)] >= 0;
      if (all) {
        if (pending_unk) ids.push_back(opts_.unk);
        pending_unk = false;
        for (char c : ch) ids.push_back(byte_ids_[static_cast<uint8_t>(c)]);
        continue;
      }
    }
    if (opts_.unk < 0) continue;
    if (pending_unk && !opts_.fuse_unk) ids.push_back(opts_.unk);
    pending_unk = true;
  }
  if (pending_unk) ids.push_back(opts_.unk);
  bpe_.merge_ids(ids, out);
}

}  // namespace lite_llama

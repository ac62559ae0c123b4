#include "tokenizer/hf_decoder.h"

#include "core/error.h"
#include "tokenizer/regex.h"
#include "tokenizer/sentencepiece_bpe.h"
#include "tokenizer/unicode.h"

namespace lite_llama {

using hfjson::json;

namespace {

void replace_all(std::string& s, const std::string& from, const std::string& to) {
  if (from.empty()) return;
  for (size_t pos = s.find(from); pos != std::string::npos; pos = s.find(from, pos + to.size())) {
    s.replace(pos, from.size(), to);
  }
}

// Removes up to `n` leading (or trailing) copies of `c`, a single UTF-8 character.
void strip_chars(std::string& s, const std::string& c, int start, int stop) {
  size_t b = 0, e = s.size();
  for (int i = 0; i < start && std::string_view(s).substr(b).starts_with(c); ++i) b += c.size();
  for (int i = 0; i < stop && e >= b + c.size() && std::string_view(s).substr(0, e).ends_with(c);
       ++i)
    e -= c.size();
  s = s.substr(b, e - b);
}

}  // namespace

std::unique_ptr<HfDecoder> HfDecoder::from_json(const json& j, const std::string& where) {
  std::unique_ptr<HfDecoder> d(new HfDecoder());
  if (j.is_null()) d->join_with_spaces_ = true;
  else d->parse(j, where);
  return d;
}

HfDecoder::~HfDecoder() = default;

void HfDecoder::parse(const json& j, const std::string& where) {
  const std::string type = hfjson::type_of(j, where);
  if (type == "Sequence") {
    const std::string w = hfjson::child(where, "decoders");
    const json& list = hfjson::member(j, "decoders", where);
    LL_CHECK(list.is_array(), "{}: expected an array", w);
    for (size_t i = 0; i < list.size(); ++i) parse(list[i], hfjson::index(w, i));
    return;
  }
  Step st{Kind::Fuse, {}, {}, nullptr};
  if (type == "ByteLevel") {
    st.kind = Kind::ByteLevel;
  } else if (type == "Replace") {
    st.kind = Kind::Replace;
    bool is_regex = false;
    st.pattern = hfjson::pattern_at(j, where, is_regex);
    if (is_regex) st.regex = std::make_unique<Regex>(st.pattern, hfjson::child(where, "pattern"));
    st.content = hfjson::string_at(j, "content", where);
  } else if (type == "ByteFallback") {
    st.kind = Kind::ByteFallback;
  } else if (type == "Fuse") {
    st.kind = Kind::Fuse;
  } else if (type == "Strip") {
    st.kind = Kind::Strip;
    st.content = hfjson::char_at(j, "content", where);
    st.start = static_cast<int>(hfjson::int_at(j, "start", where));
    st.stop = static_cast<int>(hfjson::int_at(j, "stop", where));
  } else if (type == "Metaspace") {
    st.kind = Kind::Metaspace;
    st.content = hfjson::char_at(j, "replacement", where);
    const bool legacy_prefix = hfjson::bool_or(j, "add_prefix_space", true, where);
    st.prepend = hfjson::string_or(j, "prepend_scheme", legacy_prefix ? "always" : "never",
                                   where) != "never";
  } else {
    fail("{}: decoder type '{}' is not supported (supported: ByteLevel, Replace, ByteFallback, "
         "Fuse, Strip, Metaspace, Sequence)",
         hfjson::child(where, "type"), type);
  }
  steps_.push_back(std::move(st));
}

void HfDecoder::run(const Step& st, std::vector<std::string>& tokens, bool whole_text) {
  switch (st.kind) {
    case Kind::ByteLevel: {
      // One string out, as HF's ByteLevel returns; a token with a character outside GPT-2's
      // table (an added token such as "▁" text) is kept as it is.
      std::string out;
      for (const std::string& t : tokens) {
        if (!unicode::append_symbol_bytes(t, out)) out += t;
      }
      tokens.assign(1, std::move(out));
      return;
    }
    case Kind::Replace:
      for (std::string& t : tokens) {
        if (!st.regex) {
          replace_all(t, st.pattern, st.content);
          continue;
        }
        std::string out;
        size_t pos = 0, start = 0, end = 0;
        while (st.regex->find(t, pos, start, end)) {
          out.append(t, pos, start - pos);
          out += st.content;
          pos = end;
        }
        t = out + t.substr(pos);
      }
      return;
    case Kind::ByteFallback: {
      // Runs of <0xXX> tokens become their bytes, one string per run.
      std::vector<std::string> out;
      std::string run_bytes;
      bool in_run = false;
      for (std::string& t : tokens) {
        const int b = SentencePieceBpe::byte_value(t);
        if (b >= 0) {
          run_bytes += static_cast<char>(b);
          in_run = true;
          continue;
        }
        if (in_run) out.push_back(std::move(run_bytes));
        run_bytes.clear();
        in_run = false;
        out.push_back(std::move(t));
      }
      if (in_run) out.push_back(std::move(run_bytes));
      tokens = std::move(out);
      return;
    }
    case Kind::Fuse: {
      std::string out;
      for (const std::string& t : tokens) out += t;
      tokens.assign(1, std::move(out));
      return;
    }
    case Kind::Strip:
      // In the middle of a stream a token's leading space is real text.
      if (!whole_text) return;
      for (std::string& t : tokens) strip_chars(t, st.content, st.start, st.stop);
      return;
    case Kind::Metaspace:
      for (size_t i = 0; i < tokens.size(); ++i) {
        // HF drops every replacement character of the first token, not just a leading one.
        const bool drop = whole_text && i == 0 && st.prepend;
        replace_all(tokens[i], st.content, drop ? "" : " ");
      }
      return;
  }
}

std::string HfDecoder::decode(std::vector<std::string> tokens, bool whole_text) const {
  if (join_with_spaces_) {
    std::string out;
    for (size_t i = 0; i < tokens.size(); ++i) out += (i && whole_text ? " " : "") + tokens[i];
    return out;
  }
  for (const Step& st : steps_) run(st, tokens, whole_text);
  std::string out;
  for (const std::string& t : tokens) out += t;
  return out;
}

}  // namespace lite_llama

#include "tokenizer/normalizer.h"

#ifdef LL_HAVE_ICU
#include <unicode/bytestream.h>
#include <unicode/normalizer2.h>
#endif

#include "core/error.h"
#include "tokenizer/regex.h"
#include "tokenizer/unicode.h"

namespace lite_llama {

using hfjson::json;

namespace {

#ifdef LL_HAVE_ICU
const icu::Normalizer2& icu_normalizer(std::string_view form) {
  UErrorCode status = U_ZERO_ERROR;
  const icu::Normalizer2* n = nullptr;
  if (form == "NFC") n = icu::Normalizer2::getNFCInstance(status);
  else if (form == "NFD") n = icu::Normalizer2::getNFDInstance(status);
  else if (form == "NFKC") n = icu::Normalizer2::getNFKCInstance(status);
  else if (form == "NFKD") n = icu::Normalizer2::getNFKDInstance(status);
  LL_CHECK(n && U_SUCCESS(status), "ICU has no {} normaliser: {}", form, u_errorName(status));
  return *n;
}

void normalize_valid(const icu::Normalizer2& n, std::string_view text, std::string& out) {
  UErrorCode status = U_ZERO_ERROR;
  const icu::StringPiece sp(text.data(), static_cast<int32_t>(text.size()));
  // Most text (ASCII above all) is already normalised: skip the copy through ICU then.
  if (n.isNormalizedUTF8(sp, status) && U_SUCCESS(status)) {
    out.append(text);
    return;
  }
  status = U_ZERO_ERROR;
  icu::StringByteSink<std::string> sink(&out);
  n.normalizeUTF8(0, sp, sink, nullptr, status);
  LL_CHECK(U_SUCCESS(status), "unicode normalisation failed: {}", u_errorName(status));
}

#else
// Built without ICU (no libicu-dev): tokenizers that need Unicode normalisation fail to load.
struct NoIcu {};
const NoIcu& icu_normalizer(std::string_view form) {
  fail("{} normalisation needs ICU, and this build has none (install libicu-dev and rebuild)",
       form);
}
#endif

// Whitespace as Strip defines it (Rust's char::is_whitespace: Unicode White_Space).
size_t strip_left_len(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    uint32_t cp = 0;
    const int n = unicode::decode_utf8(s, i, cp);
    if (n == 0 || !unicode::is_white_space(cp)) break;
    i += n;
  }
  return i;
}

size_t strip_right_start(std::string_view s) {
  size_t end = s.size();
  while (end > 0) {
    size_t b = end - 1;
    while (b > 0 && (static_cast<uint8_t>(s[b]) & 0xC0) == 0x80 && end - b < 4) --b;
    uint32_t cp = 0;
    if (unicode::decode_utf8(s, b, cp) != static_cast<int>(end - b) ||
        !unicode::is_white_space(cp))
      break;
    end = b;
  }
  return end;
}

void replace_all(std::string& s, std::string_view from, std::string_view to) {
  if (from.empty() || s.find(from) == std::string::npos) return;
  std::string out;
  out.reserve(s.size() + s.size() / 4);
  size_t pos = 0;
  for (size_t hit; (hit = s.find(from, pos)) != std::string::npos; pos = hit + from.size()) {
    out.append(s, pos, hit - pos);
    out.append(to);
  }
  out.append(s, pos);
  s = std::move(out);
}

}  // namespace

#ifdef LL_HAVE_ICU
std::string unicode_normalize(std::string_view text, std::string_view form) {
  const icu::Normalizer2& n = icu_normalizer(form);
  std::string out;
  out.reserve(text.size());
  // ICU would turn invalid bytes into U+FFFD; HF never sees them (Python strings are valid),
  // and the byte-level models can still encode them, so only the valid runs are normalised.
  size_t run = 0, i = 0;
  while (i < text.size()) {
    uint32_t cp = 0;
    const int len = unicode::decode_utf8(text, i, cp);
    if (len > 0) {
      i += len;
      continue;
    }
    if (i > run) normalize_valid(n, text.substr(run, i - run), out);
    out += text[i++];
    run = i;
  }
  if (i > run) normalize_valid(n, text.substr(run, i - run), out);
  return out;
}
#else
std::string unicode_normalize(std::string_view text, std::string_view form) {
  icu_normalizer(form);
  return std::string(text);
}
#endif

std::unique_ptr<Normalizer> Normalizer::from_json(const json& j, const std::string& where) {
  if (j.is_null()) return nullptr;
  std::unique_ptr<Normalizer> n(new Normalizer());
  n->parse(j, where);
  return n;
}

Normalizer::~Normalizer() = default;

void Normalizer::parse(const json& j, const std::string& where) {
  const std::string type = hfjson::type_of(j, where);
  Step st;
  if (type == "Sequence") {
    const std::string w = hfjson::child(where, "normalizers");
    const json& list = hfjson::member(j, "normalizers", where);
    LL_CHECK(list.is_array(), "{}: expected an array", w);
    for (size_t i = 0; i < list.size(); ++i) parse(list[i], hfjson::index(w, i));
    return;
  }
  if (type == "NFC" || type == "NFD" || type == "NFKC" || type == "NFKD") {
    icu_normalizer(type);  // fail at load time, not on the first encode
    st.kind = type == "NFC" ? Kind::Nfc : type == "NFD" ? Kind::Nfd
              : type == "NFKC" ? Kind::Nfkc : Kind::Nfkd;
  } else if (type == "Prepend") {
    st.kind = Kind::Prepend;
    st.text = hfjson::string_at(j, "prepend", where);
  } else if (type == "Replace") {
    st.kind = Kind::Replace;
    bool is_regex = false;
    st.text = hfjson::pattern_at(j, where, is_regex);
    if (is_regex) st.regex = std::make_unique<Regex>(st.text, hfjson::child(where, "pattern"));
    st.content = hfjson::string_at(j, "content", where);
  } else if (type == "Strip") {
    st.kind = Kind::Strip;
    st.left = hfjson::bool_or(j, "strip_left", true, where);
    st.right = hfjson::bool_or(j, "strip_right", true, where);
  } else {
    fail("{}: normalizer type '{}' is not supported (supported: NFC, NFD, NFKC, NFKD, Prepend, "
         "Replace, Strip, Sequence)",
         hfjson::child(where, "type"), type);
  }
  steps_.push_back(std::move(st));
}

void Normalizer::apply_step(const Step& st, std::string& text) {
  switch (st.kind) {
    case Kind::Nfc: text = unicode_normalize(text, "NFC"); break;
    case Kind::Nfd: text = unicode_normalize(text, "NFD"); break;
    case Kind::Nfkc: text = unicode_normalize(text, "NFKC"); break;
    case Kind::Nfkd: text = unicode_normalize(text, "NFKD"); break;
    case Kind::Prepend:
      // HF leaves empty text empty: nothing to attach the prefix to.
      if (!text.empty()) text.insert(0, st.text);
      break;
    case Kind::Replace:
      if (!st.regex) {
        replace_all(text, st.text, st.content);
      } else {
        std::string out;
        size_t pos = 0, start = 0, end = 0;
        while (st.regex->find(text, pos, start, end)) {
          out.append(text, pos, start - pos);
          out.append(st.content);
          pos = end;
        }
        out.append(text, pos);
        text = std::move(out);
      }
      break;
    case Kind::Strip: {
      const size_t end = st.right ? strip_right_start(text) : text.size();
      const size_t begin = st.left ? strip_left_len(std::string_view(text).substr(0, end)) : 0;
      text = text.substr(begin, end - begin);
      break;
    }
  }
}

std::string Normalizer::apply(std::string_view text) const {
  std::string out(text);
  for (const Step& st : steps_) apply_step(st, out);
  return out;
}

}  // namespace lite_llama

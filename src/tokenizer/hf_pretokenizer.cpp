#include "tokenizer/hf_pretokenizer.h"

#include <algorithm>

#include "core/error.h"
#include "tokenizer/regex.h"

namespace lite_llama {

using hfjson::json;

namespace {

// GPT-2's split, which ByteLevel(use_regex=true) applies.
constexpr const char* kGpt2Regex =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

struct Segment {
  size_t start, end;
  bool is_match;
};

// Turns matches and the gaps between them into pieces following HF's SplitDelimiterBehavior
// (tokenizers/src/tokenizer/normalizer.rs), so merged pieces come out exactly as there.
template <typename Behavior>
void apply_behavior(const std::vector<Segment>& segs, Behavior b, std::vector<Segment>& out) {
  out.clear();
  bool prev_match = false;
  switch (b) {
    case Behavior::Removed:
      for (const Segment& s : segs)
        if (!s.is_match) out.push_back(s);
      return;
    case Behavior::Isolated:
      out = segs;
      return;
    case Behavior::MergedWithPrevious:
      for (const Segment& s : segs) {
        if (s.is_match && !prev_match && !out.empty()) out.back().end = s.end;
        else out.push_back(s);
        prev_match = s.is_match;
      }
      return;
    case Behavior::MergedWithNext:
      for (size_t i = segs.size(); i-- > 0;) {
        const Segment& s = segs[i];
        if (s.is_match && !prev_match && !out.empty()) out.back().start = s.start;
        else out.push_back(s);
        prev_match = s.is_match;
      }
      std::reverse(out.begin(), out.end());
      return;
    case Behavior::Contiguous:
      for (const Segment& s : segs) {
        if (s.is_match == prev_match && !out.empty()) out.back().end = s.end;
        else out.push_back(s);
        prev_match = s.is_match;
      }
      return;
  }
}

}  // namespace

std::unique_ptr<HfPreTokenizer> HfPreTokenizer::from_json(const json& j, const std::string& where) {
  std::unique_ptr<HfPreTokenizer> p(new HfPreTokenizer());
  if (!j.is_null()) p->parse(j, where);
  return p;
}

HfPreTokenizer::~HfPreTokenizer() = default;

void HfPreTokenizer::parse(const json& j, const std::string& where) {
  const std::string type = hfjson::type_of(j, where);
  if (type == "Sequence") {
    const std::string w = hfjson::child(where, "pretokenizers");
    const json& list = hfjson::member(j, "pretokenizers", where);
    LL_CHECK(list.is_array(), "{}: expected an array", w);
    for (size_t i = 0; i < list.size(); ++i) parse(list[i], hfjson::index(w, i));
    return;
  }
  LL_CHECK(!byte_level_,
           "{}: a {} step after ByteLevel is not supported (ByteLevel must come last)", where,
           type);
  Step st;
  if (type == "Split") {
    bool is_regex = false;
    const std::string pattern = hfjson::pattern_at(j, where, is_regex);
    st.regex = std::make_unique<Regex>(pattern, hfjson::child(where, "pattern"), !is_regex);
    const std::string b = hfjson::string_at(j, "behavior", where);
    if (b == "Removed") st.behavior = Behavior::Removed;
    else if (b == "Isolated") st.behavior = Behavior::Isolated;
    else if (b == "MergedWithPrevious") st.behavior = Behavior::MergedWithPrevious;
    else if (b == "MergedWithNext") st.behavior = Behavior::MergedWithNext;
    else if (b == "Contiguous") st.behavior = Behavior::Contiguous;
    else fail("{}: unknown split behavior '{}'", hfjson::child(where, "behavior"), b);
    st.invert = hfjson::bool_or(j, "invert", false, where);
  } else if (type == "Digits") {
    // HF splits on char::is_numeric (categories Nd, Nl, No), which is PCRE2's \p{N}.
    const bool individual = hfjson::bool_or(j, "individual_digits", false, where);
    st.regex = std::make_unique<Regex>(individual ? R"(\p{N})" : R"(\p{N}+)", where);
  } else if (type == "ByteLevel") {
    st.kind = Kind::ByteLevel;
    st.add_prefix_space = hfjson::bool_or(j, "add_prefix_space", true, where);
    if (hfjson::bool_or(j, "use_regex", true, where)) {
      st.regex = std::make_unique<Regex>(kGpt2Regex, hfjson::child(where, "use_regex"));
    }
    byte_level_ = true;
  } else if (type == "Metaspace") {
    st.kind = Kind::Metaspace;
    st.replacement = hfjson::char_at(j, "replacement", where);
    // Files older than prepend_scheme only have add_prefix_space (true meant "always").
    const bool legacy_prefix = hfjson::bool_or(j, "add_prefix_space", true, where);
    const std::string scheme =
        hfjson::string_or(j, "prepend_scheme", legacy_prefix ? "always" : "never", where);
    if (scheme == "always") st.prepend = Prepend::Always;
    else if (scheme == "first") st.prepend = Prepend::First;
    else if (scheme == "never") st.prepend = Prepend::Never;
    else fail("{}: unknown prepend_scheme '{}'", hfjson::child(where, "prepend_scheme"), scheme);
    st.split = hfjson::bool_or(j, "split", true, where);
  } else {
    fail("{}: pre-tokenizer type '{}' is not supported (supported: ByteLevel, Split, Digits, "
         "Metaspace, Sequence)",
         hfjson::child(where, "type"), type);
  }
  steps_.push_back(std::move(st));
}

void HfPreTokenizer::run_step(const Step& st, const PrePiece& in, std::vector<PrePiece>& out,
                              std::deque<std::string>& arena) const {
  std::string_view text = in.text;
  thread_local std::vector<Segment> segs, pieces;
  segs.clear();
  Behavior behavior = st.behavior;
  if (st.kind == Kind::ByteLevel && st.add_prefix_space && !text.starts_with(' ')) {
    std::string& s = arena.emplace_back();
    s.reserve(text.size() + 1);
    s += ' ';
    s.append(text);
    text = s;
  }
  if (st.kind == Kind::Metaspace) {
    std::string s;
    s.reserve(text.size() + 3);
    for (char c : text) {
      if (c == ' ') s += st.replacement;
      else s += c;
    }
    const bool prepend =
        !std::string_view(s).starts_with(st.replacement) &&
        (st.prepend == Prepend::Always || (st.prepend == Prepend::First && in.at_origin));
    if (prepend) s.insert(0, st.replacement);
    arena.push_back(std::move(s));
    text = arena.back();
    if (!st.split) {
      out.push_back(PrePiece{text, in.at_origin});
      return;
    }
    // Every "▁" starts a new piece (HF: split on the replacement, MergedWithNext).
    size_t prev = 0;
    for (size_t hit = text.find(st.replacement); hit != std::string_view::npos;
         hit = text.find(st.replacement, hit + st.replacement.size())) {
      if (hit > prev) segs.push_back(Segment{prev, hit, false});
      segs.push_back(Segment{hit, hit + st.replacement.size(), true});
      prev = hit + st.replacement.size();
    }
    if (prev < text.size()) segs.push_back(Segment{prev, text.size(), false});
    behavior = Behavior::MergedWithNext;
  } else if (!st.regex) {  // ByteLevel without its regex
    out.push_back(PrePiece{text, in.at_origin});
    return;
  } else {
    size_t pos = 0, prev = 0, start = 0, end = 0;
    while (st.regex->find(text, pos, start, end)) {
      if (start > prev) segs.push_back(Segment{prev, start, false});
      segs.push_back(Segment{start, end, true});
      prev = pos = end;
    }
    if (prev < text.size()) segs.push_back(Segment{prev, text.size(), false});
    if (st.invert) {
      for (Segment& s : segs) s.is_match = !s.is_match;
    }
  }
  apply_behavior(segs, behavior, pieces);
  for (const Segment& s : pieces) {
    if (s.end > s.start)
      out.push_back(PrePiece{text.substr(s.start, s.end - s.start), in.at_origin && s.start == 0});
  }
}

void HfPreTokenizer::split(std::string_view text, bool at_origin, std::vector<PrePiece>& out,
                           std::deque<std::string>& arena) const {
  if (text.empty()) return;
  if (steps_.empty()) {
    out.push_back(PrePiece{text, at_origin});
    return;
  }
  std::vector<PrePiece> cur{PrePiece{text, at_origin}}, next;
  for (size_t s = 0; s < steps_.size(); ++s) {
    const bool last = s + 1 == steps_.size();
    auto& dst = last ? out : next;
    if (!last) next.clear();
    for (const PrePiece& p : cur) run_step(steps_[s], p, dst, arena);
    if (!last) std::swap(cur, next);
  }
}

}  // namespace lite_llama

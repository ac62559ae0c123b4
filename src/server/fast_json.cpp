#include "server/fast_json.h"

#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>

#include "core/utf8.h"

namespace lite_llama::server {
namespace {

using json = nlohmann::json;

constexpr uint64_t kOnes = 0x0101010101010101ULL;
constexpr uint64_t kHighs = 0x8080808080808080ULL;

uint64_t zero_bytes(uint64_t x) { return (x - kOnes) & ~x & kHighs; }

// Nonzero when one of the 8 bytes of w is '"', '\\', a control character or not ASCII: the
// bytes a string cannot simply copy. Exact as a yes/no (borrows only flag bytes above a hit).
uint64_t special_bytes(uint64_t w) {
  const uint64_t control = (w - kOnes * 0x20) & ~w & kHighs;
  return zero_bytes(w ^ (kOnes * '"')) | zero_bytes(w ^ (kOnes * '\\')) | control | (w & kHighs);
}

bool in(unsigned char c, unsigned lo, unsigned hi) { return c >= lo && c <= hi; }

class Parser {
 public:
  Parser(std::string_view text, int max_depth)
      : p_(reinterpret_cast<const unsigned char*>(text.data())), end_(p_ + text.size()),
        depth_left_(max_depth) {}

  bool document(json& out) {
    skip_space();
    if (!value(out)) return false;
    skip_space();
    return p_ == end_;
  }

 private:
  const unsigned char* p_;
  const unsigned char* end_;
  int depth_left_;

  void skip_space() {
    while (p_ < end_ && (*p_ == ' ' || *p_ == '\n' || *p_ == '\r' || *p_ == '\t')) ++p_;
  }

  bool next_is(unsigned char c) {
    if (p_ == end_ || *p_ != c) return false;
    ++p_;
    return true;
  }

  bool word(std::string_view w) {
    if (size_t(end_ - p_) < w.size() || std::memcmp(p_, w.data(), w.size()) != 0) return false;
    p_ += w.size();
    return true;
  }

  bool value(json& out) {
    if (p_ == end_) return false;
    switch (*p_) {
      case '{': return object(out);
      case '[': return array(out);
      case '"': {
        ++p_;
        out = json::value_t::string;
        return string(out.get_ref<std::string&>());
      }
      case 't': out = true; return word("true");
      case 'f': out = false; return word("false");
      case 'n': out = nullptr; return word("null");
      default: return number(out);
    }
  }

  bool object(json& out) {
    if (--depth_left_ < 0) return false;
    ++p_;
    out = json::value_t::object;
    auto& obj = out.get_ref<json::object_t&>();
    skip_space();
    if (next_is('}')) return ++depth_left_, true;
    for (;;) {
      skip_space();
      std::string key;
      if (!next_is('"') || !string(key)) return false;
      skip_space();
      if (!next_is(':')) return false;
      skip_space();
      // nlohmann keeps the last of duplicate keys; rare enough to leave to it.
      auto [it, added] = obj.try_emplace(std::move(key));
      if (!added || !value(it->second)) return false;
      skip_space();
      if (next_is(',')) continue;
      if (!next_is('}')) return false;
      return ++depth_left_, true;
    }
  }

  bool array(json& out) {
    if (--depth_left_ < 0) return false;
    ++p_;
    out = json::value_t::array;
    auto& arr = out.get_ref<json::array_t&>();
    skip_space();
    if (next_is(']')) return ++depth_left_, true;
    for (;;) {
      skip_space();
      if (!value(arr.emplace_back())) return false;
      skip_space();
      if (next_is(',')) continue;
      if (!next_is(']')) return false;
      return ++depth_left_, true;
    }
  }

  // After the opening quote.
  bool string(std::string& out) {
    const unsigned char* run = p_;
    for (;;) {
      uint64_t w;
      while (end_ - p_ >= 8 && (std::memcpy(&w, p_, 8), special_bytes(w) == 0)) p_ += 8;
      if (p_ == end_) return false;
      const unsigned char c = *p_;
      if (c >= 0x20 && c < 0x80 && c != '"' && c != '\\') {
        ++p_;
        continue;
      }
      if (c >= 0x80) {
        const int n = utf8_char_length(p_, end_);
        if (n == 0) return false;
        p_ += n;
        continue;
      }
      out.append(reinterpret_cast<const char*>(run), size_t(p_ - run));
      ++p_;
      if (c == '"') return true;
      if (c != '\\' || !escape(out)) return false;  // a control character must be escaped
      run = p_;
    }
  }

  bool hex4(uint32_t& v) {
    if (end_ - p_ < 4) return false;
    v = 0;
    for (int i = 0; i < 4; ++i) {
      const unsigned char c = *p_++;
      uint32_t d;
      if (in(c, '0', '9')) d = c - '0';
      else if (in(c, 'a', 'f')) d = c - 'a' + 10;
      else if (in(c, 'A', 'F')) d = c - 'A' + 10;
      else return false;
      v = v * 16 + d;
    }
    return true;
  }

  // After the backslash.
  bool escape(std::string& out) {
    if (p_ == end_) return false;
    switch (*p_++) {
      case '"': out += '"'; return true;
      case '\\': out += '\\'; return true;
      case '/': out += '/'; return true;
      case 'b': out += '\b'; return true;
      case 'f': out += '\f'; return true;
      case 'n': out += '\n'; return true;
      case 'r': out += '\r'; return true;
      case 't': out += '\t'; return true;
      case 'u': break;
      default: return false;
    }
    uint32_t cp = 0, low = 0;
    if (!hex4(cp) || in8(cp, 0xDC00, 0xDFFF)) return false;  // a lone low surrogate
    if (in8(cp, 0xD800, 0xDBFF)) {
      if (!next_is('\\') || !next_is('u') || !hex4(low) || !in8(low, 0xDC00, 0xDFFF)) return false;
      cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
    }
    append_utf8(out, cp);
    return true;
  }

  static bool in8(uint32_t v, uint32_t lo, uint32_t hi) { return v >= lo && v <= hi; }

  bool digits() {
    const unsigned char* s = p_;
    while (p_ < end_ && in(*p_, '0', '9')) ++p_;
    return p_ > s;
  }

  // JSON's grammar; integers as nlohmann types them (unsigned unless negative), and those that
  // overflow 64 bits as doubles, as nlohmann does.
  bool number(json& out) {
    const char* s = reinterpret_cast<const char*>(p_);
    const bool negative = next_is('-');
    if (!next_is('0') && !digits()) return false;
    bool integral = true;
    if (next_is('.')) {
      integral = false;
      if (!digits()) return false;
    }
    if (next_is('e') || next_is('E')) {
      integral = false;
      if (!next_is('+')) next_is('-');
      if (!digits()) return false;
    }
    const char* e = reinterpret_cast<const char*>(p_);
    if (integral && negative) {
      int64_t v = 0;
      if (auto r = std::from_chars(s, e, v); r.ec == std::errc() && r.ptr == e) return out = v, true;
    } else if (integral) {
      uint64_t v = 0;
      if (auto r = std::from_chars(s, e, v); r.ec == std::errc() && r.ptr == e) return out = v, true;
    }
    double d = 0;
    const auto r = std::from_chars(s, e, d);
    if (r.ec != std::errc() || r.ptr != e || !std::isfinite(d)) return false;
    out = d;
    return true;
  }
};

}  // namespace

std::optional<json> parse_json_fast(std::string_view text, int max_depth) {
  json out;
  if (!Parser(text, max_depth).document(out)) return std::nullopt;
  return out;
}

}  // namespace lite_llama::server

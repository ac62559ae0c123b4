#include "tokenizer/unicode.h"

#include "core/utf8.h"

namespace lite_llama::unicode {

void append_utf8(std::string& out, uint32_t cp) { ::lite_llama::append_utf8(out, cp); }

int utf8_seq_len(uint8_t lead) {
  if (lead < 0x80) return 1;
  if (lead < 0xC2) return 0;  // continuation byte or overlong 2-byte lead
  if (lead < 0xE0) return 2;
  if (lead < 0xF0) return 3;
  if (lead < 0xF5) return 4;
  return 0;
}

namespace {

// Allowed range of the byte after the lead: the narrower ranges exclude overlong forms,
// UTF-16 surrogates (ED A0..BF) and code points above U+10FFFF (F4 90..).
bool second_byte_ok(uint8_t lead, uint8_t b) {
  switch (lead) {
    case 0xE0: return b >= 0xA0 && b <= 0xBF;
    case 0xED: return b >= 0x80 && b <= 0x9F;
    case 0xF0: return b >= 0x90 && b <= 0xBF;
    case 0xF4: return b >= 0x80 && b <= 0x8F;
    default: return (b & 0xC0) == 0x80;
  }
}

// How many bytes from s[i] form a valid (possibly incomplete) start of a sequence: 0 when s[i]
// cannot start one. `need` receives the full length the lead asks for.
int valid_run(std::string_view s, size_t i, int& need) {
  const auto lead = static_cast<uint8_t>(s[i]);
  need = utf8_seq_len(lead);
  if (need == 0) return 0;
  int n = 1;
  while (n < need && i + n < s.size()) {
    const auto b = static_cast<uint8_t>(s[i + n]);
    const bool ok = n == 1 ? second_byte_ok(lead, b) : (b & 0xC0) == 0x80;
    if (!ok) break;
    ++n;
  }
  return n;
}

}  // namespace

int decode_utf8(std::string_view s, size_t i, uint32_t& cp) {
  if (i >= s.size()) return 0;
  int need = 0;
  const int n = valid_run(s, i, need);
  if (n == 0 || n < need) return 0;
  const auto* p = reinterpret_cast<const uint8_t*>(s.data() + i);
  switch (need) {
    case 1: cp = p[0]; break;
    case 2: cp = ((p[0] & 0x1Fu) << 6) | (p[1] & 0x3Fu); break;
    case 3: cp = ((p[0] & 0x0Fu) << 12) | ((p[1] & 0x3Fu) << 6) | (p[2] & 0x3Fu); break;
    default:
      cp = ((p[0] & 0x07u) << 18) | ((p[1] & 0x3Fu) << 12) | ((p[2] & 0x3Fu) << 6) | (p[3] & 0x3Fu);
  }
  return need;
}

size_t complete_prefix_len(std::string_view s) {
  // Only the last 3 bytes can belong to an unfinished sequence.
  const size_t lo = s.size() > 3 ? s.size() - 3 : 0;
  for (size_t i = s.size(); i-- > lo;) {
    const auto b = static_cast<uint8_t>(s[i]);
    if ((b & 0xC0) == 0x80) continue;  // continuation: look further back for its lead
    int need = 0;
    const int n = valid_run(s, i, need);
    // Held back only when everything from the lead to the end is a valid, unfinished start.
    if (need > 1 && n == static_cast<int>(s.size() - i) && n < need) return i;
    return s.size();
  }
  return s.size();
}

std::string sanitize_utf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    int need = 0;
    const int n = valid_run(s, i, need);
    if (n > 0 && n == need) {
      out.append(s.substr(i, n));
      i += n;
    } else {
      out += "\xEF\xBF\xBD";
      i += n > 0 ? n : 1;
    }
  }
  return out;
}

bool is_valid_utf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    int need = 0;
    const int n = valid_run(s, i, need);
    if (n == 0 || n < need) return false;
    i += n;
  }
  return true;
}

namespace {

// GPT-2 keeps printable Latin-1 bytes as themselves and moves the rest (controls, space,
// 0x7F..0xA0, 0xAD) to U+0100 upwards, in byte order.
struct ByteTables {
  std::array<std::string, 256> to_symbol;
  std::array<int16_t, 324> to_byte;  // code point -> byte, -1 outside the table

  ByteTables() {
    to_byte.fill(-1);
    uint32_t next = 256;
    for (uint32_t b = 0; b < 256; ++b) {
      const bool keep = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
      const uint32_t cp = keep ? b : next++;
      append_utf8(to_symbol[b], cp);
      to_byte[cp] = static_cast<int16_t>(b);
    }
  }
};

const ByteTables& tables() {
  static const ByteTables t;
  return t;
}

}  // namespace

const std::array<std::string, 256>& byte_to_symbol() { return tables().to_symbol; }

std::string symbols_to_bytes(std::string_view symbols) {
  const auto& t = tables();
  std::string out;
  out.reserve(symbols.size());
  size_t i = 0;
  while (i < symbols.size()) {
    uint32_t cp = 0;
    const int n = decode_utf8(symbols, i, cp);
    if (n == 0) {  // not UTF-8: pass the byte through
      out += symbols[i++];
      continue;
    }
    if (cp < t.to_byte.size() && t.to_byte[cp] >= 0) {
      out += static_cast<char>(t.to_byte[cp]);
    } else {
      out.append(symbols.substr(i, n));
    }
    i += n;
  }
  return out;
}

bool append_symbol_bytes(std::string_view symbols, std::string& out) {
  const auto& t = tables();
  const size_t mark = out.size();
  for (size_t i = 0; i < symbols.size();) {
    uint32_t cp = 0;
    const int n = decode_utf8(symbols, i, cp);
    if (n == 0 || cp >= t.to_byte.size() || t.to_byte[cp] < 0) {
      out.resize(mark);
      return false;
    }
    out += static_cast<char>(t.to_byte[cp]);
    i += n;
  }
  return true;
}

bool is_white_space(uint32_t cp) {
  if (cp < 0x80) return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20;
  return cp == 0x85 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) ||
         cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

}  // namespace lite_llama::unicode

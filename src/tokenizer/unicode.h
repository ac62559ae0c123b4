// UTF-8 helpers and GPT-2's byte <-> character table. Byte-level BPE vocabularies store every
// byte as a printable character (space is "Ġ", newline "Ċ"), so tokens are plain UTF-8 strings
// and merges never see raw control bytes.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>


namespace lite_llama::unicode {

// Appends the UTF-8 encoding of a code point (no validation beyond the 21-bit range).
void append_utf8(std::string& out, uint32_t cp);  // core/utf8.h's

// Length in bytes of the sequence that `lead` starts (1-4), or 0 when `lead` cannot start one
// (a continuation byte, 0xC0/0xC1 overlong leads, or 0xF5..0xFF).
int utf8_seq_len(uint8_t lead);

// Decodes the well-formed sequence at s[i] (shortest form, no surrogates, <= U+10FFFF).
// Returns its length and sets cp, or returns 0 when the bytes there are not a whole valid
// sequence (either invalid or cut short by the end of s).
int decode_utf8(std::string_view s, size_t i, uint32_t& cp);

// Length of the longest prefix of s that ends on a character boundary, leaving out a trailing
// sequence that is valid so far but incomplete (more bytes could still complete it).
// Invalid bytes elsewhere do not shorten the prefix: waiting would not make them valid.
size_t complete_prefix_len(std::string_view s);

// s with every byte that is not part of a valid sequence replaced by U+FFFD (one per
// maximal invalid subpart, as the Unicode standard recommends and Python's decoder does).
std::string sanitize_utf8(std::string_view s);

bool is_valid_utf8(std::string_view s);

// Unicode's White_Space property (what `\s` means in HF's Rust regexes, e.g. for the lstrip and
// rstrip flags of added tokens).
bool is_white_space(uint32_t cp);

// GPT-2's table: byte -> its stand-in character, as UTF-8 (e.g. 0x20 -> "Ġ").
const std::array<std::string, 256>& byte_to_symbol();

// Maps a byte-level string back to raw bytes. Characters outside the table (which a well-formed
// byte-level vocabulary never contains) are copied through unchanged.
std::string symbols_to_bytes(std::string_view symbols);

// Appends the raw bytes of a byte-level string when every character is in the table; otherwise
// appends nothing and returns false (HF's ByteLevel decoder then keeps the token as it is).
bool append_symbol_bytes(std::string_view symbols, std::string& out);

}  // namespace lite_llama::unicode

// Typed access to the fields of HF tokenizer files. Every error names the file and the field
// ("dir/tokenizer.json: pre_tokenizer.pretokenizers[1].pattern"), so a user can find the line
// at fault; `where` carries that prefix down the JSON tree.
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <string_view>

namespace lite_llama::hfjson {

using json = nlohmann::json;

inline std::string child(const std::string& where, std::string_view key) {
  return where + (where.ends_with(": ") ? "" : ".") + std::string(key);
}
inline std::string index(const std::string& where, size_t i) {
  return where + "[" + std::to_string(i) + "]";
}

// Required member of an object.
const json& member(const json& obj, std::string_view key, const std::string& where);
// Null when absent.
const json* find(const json& obj, std::string_view key);

std::string string_at(const json& obj, std::string_view key, const std::string& where);
// Absent or null -> `def`.
std::string string_or(const json& obj, std::string_view key, std::string_view def,
                      const std::string& where);
bool bool_or(const json& obj, std::string_view key, bool def, const std::string& where);
int64_t int_at(const json& obj, std::string_view key, const std::string& where);
// The "type" of a component ("BPE", "ByteLevel", ...).
std::string type_of(const json& obj, const std::string& where);
// A single-character string field (Metaspace's replacement, Strip's content).
std::string char_at(const json& obj, std::string_view key, const std::string& where);

// The {"String": "..."} / {"Regex": "..."} pattern of Split and Replace; `is_regex` tells which.
std::string pattern_at(const json& obj, const std::string& where, bool& is_regex);

}  // namespace lite_llama::hfjson

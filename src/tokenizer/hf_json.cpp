#include "tokenizer/hf_json.h"

#include "core/error.h"
#include "tokenizer/unicode.h"

namespace lite_llama::hfjson {

namespace {

const char* kind(const json& v) { return v.type_name(); }

}  // namespace

const json* find(const json& obj, std::string_view key) {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(key);
  return it == obj.end() ? nullptr : &*it;
}

const json& member(const json& obj, std::string_view key, const std::string& where) {
  LL_CHECK(obj.is_object(), "{}: expected an object, found {}", where, kind(obj));
  const json* v = find(obj, key);
  LL_CHECK(v, "{}: missing field '{}'", where, key);
  return *v;
}

std::string string_at(const json& obj, std::string_view key, const std::string& where) {
  const json& v = member(obj, key, where);
  LL_CHECK(v.is_string(), "{}: expected a string, found {}", child(where, key), kind(v));
  return v.get<std::string>();
}

std::string string_or(const json& obj, std::string_view key, std::string_view def,
                      const std::string& where) {
  const json* v = find(obj, key);
  if (!v || v->is_null()) return std::string(def);
  LL_CHECK(v->is_string(), "{}: expected a string, found {}", child(where, key), kind(*v));
  return v->get<std::string>();
}

bool bool_or(const json& obj, std::string_view key, bool def, const std::string& where) {
  const json* v = find(obj, key);
  if (!v || v->is_null()) return def;
  LL_CHECK(v->is_boolean(), "{}: expected true or false, found {}", child(where, key), kind(*v));
  return v->get<bool>();
}

int64_t int_at(const json& obj, std::string_view key, const std::string& where) {
  const json& v = member(obj, key, where);
  LL_CHECK(v.is_number_integer(), "{}: expected an integer, found {}", child(where, key),
           kind(v));
  return v.get<int64_t>();
}

std::string type_of(const json& obj, const std::string& where) {
  LL_CHECK(obj.is_object(), "{}: expected an object, found {}", where, kind(obj));
  return string_at(obj, "type", where);
}

std::string char_at(const json& obj, std::string_view key, const std::string& where) {
  std::string s = string_at(obj, key, where);
  uint32_t cp = 0;
  LL_CHECK(!s.empty() && unicode::decode_utf8(s, 0, cp) == static_cast<int>(s.size()),
           "{}: expected a single character, found '{}'", child(where, key), s);
  return s;
}

std::string pattern_at(const json& obj, const std::string& where, bool& is_regex) {
  const std::string w = child(where, "pattern");
  const json& p = member(obj, "pattern", where);
  LL_CHECK(p.is_object(), "{}: expected {{\"String\": ...}} or {{\"Regex\": ...}}, found {}", w,
           kind(p));
  if (const json* s = find(p, "String")) {
    LL_CHECK(s->is_string(), "{}.String: expected a string", w);
    is_regex = false;
    return s->get<std::string>();
  }
  if (const json* r = find(p, "Regex")) {
    LL_CHECK(r->is_string(), "{}.Regex: expected a string", w);
    is_regex = true;
    return r->get<std::string>();
  }
  fail("{}: expected {{\"String\": ...}} or {{\"Regex\": ...}}", w);
}

}  // namespace lite_llama::hfjson

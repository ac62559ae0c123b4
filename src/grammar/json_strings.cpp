#include "grammar/json_strings.h"

#include <map>
#include <vector>

#include "grammar/ast.h"
#include "grammar/gbnf_parser.h"
#include "grammar/regex_to_gbnf.h"

namespace lite_llama::grammar {

namespace {

std::string quoted(const std::string& s) {
  std::string out(1, '"');
  out.append(gbnf_escape(s)).push_back('"');
  return out;
}

std::string join(const std::vector<std::string>& parts, const char* sep) {
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : sep) + p;
  return out;
}

// "(" + s + ")", built by appending (GCC 12 warns falsely on "literal" + std::string&&).
std::string group(const std::string& s) {
  std::string out(1, '(');
  out.append(s).push_back(')');
  return out;
}

std::string cls(std::vector<CodeRange> r) { return gbnf_class(normalize_ranges(std::move(r), false)); }

// One hex digit of the given values, either case.
std::string nibble_class(const std::set<int>& nibbles) {
  std::vector<CodeRange> r;
  for (int n : nibbles) {
    if (n < 10) r.push_back({uint32_t('0' + n), uint32_t('0' + n)});
    else r.insert(r.end(), {{uint32_t('a' + n - 10), uint32_t('a' + n - 10)}, {uint32_t('A' + n - 10), uint32_t('A' + n - 10)}});
  }
  return cls(std::move(r));
}

// The hex digits of \uXXXX (after "u") whose value is none of `taken`, or "" when none is left.
// `prefix`: the value of the `level` digits already written.
std::string hex_except(const std::set<uint16_t>& taken, uint32_t prefix = 0, int level = 0) {
  const int rest = 4 - level;
  const uint32_t lo = prefix << (4 * rest), hi = lo + (1u << (4 * rest)) - 1;
  const std::string any_rest = rest > 1 ? " [0-9a-fA-F]{" + std::to_string(rest - 1) + "}" : "";
  std::set<int> used, free;
  for (auto it = taken.lower_bound(uint16_t(lo)); it != taken.end() && *it <= hi; ++it)
    used.insert((*it >> (4 * (rest - 1))) & 15);
  for (int n = 0; n < 16; ++n)
    if (!used.count(n)) free.insert(n);
  std::vector<std::string> alts;
  if (!free.empty()) alts.push_back(nibble_class(free) + any_rest);
  if (rest > 1)
    for (int n : used) {
      const std::string sub = hex_except(taken, prefix * 16 + uint32_t(n), level + 1);
      if (!sub.empty()) alts.push_back(nibble_class({n}) + " (" + sub + ")");
    }
  return join(alts, " | ");
}

// The letter of a JSON short escape (\n, \/, ...) for a code unit, or 0.
char short_escape(uint32_t u) {
  static const std::map<uint32_t, char> m = {{'"', '"'}, {'\\', '\\'}, {'/', '/'}, {0x08, 'b'},
                                             {0x0C, 'f'}, {0x0A, 'n'}, {0x0D, 'r'}, {0x09, 't'}};
  auto it = m.find(u);
  return it == m.end() ? 0 : it->second;
}

bool surrogate(uint32_t u) { return u >= 0xD800 && u <= 0xDFFF; }

// Every way a JSON string body writes the UTF-16 code unit `u` on its own: raw, a short escape,
// \uXXXX in either case.
std::string spellings(uint32_t u) {
  std::vector<std::string> alts;
  if (u >= 0x20 && u != '"' && u != '\\' && !surrogate(u)) {
    std::string raw;
    append_utf8(raw, u);
    alts.push_back(quoted(raw));
  }
  if (const char c = short_escape(u)) alts.push_back(quoted(std::string("\\") + c));
  std::string hex = quoted("\\u");
  for (int shift = 12; shift >= 0; shift -= 4) hex.append(" ").append(nibble_class({int(u >> shift) & 15}));
  alts.push_back(hex);
  return group(join(alts, " | "));
}

// Declared names as UTF-16 code units. JSON decoding joins an escaped surrogate pair into one
// code point, as a raw one is, so two keys decode to the same string exactly when their units
// match: the trie compares units, whichever way each is spelled.
struct Trie {
  std::map<uint16_t, Trie> kids;
  bool end = false;
  std::string rule;
};

std::string build(Trie& t, const std::function<std::string(const std::string&, const std::string&)>& add_rule) {
  for (auto& [u, kid] : t.kids) build(kid, add_rule);
  std::vector<std::string> alts;
  if (!t.end) alts.push_back(quoted("\""));
  std::vector<CodeRange> taken_raw{{0, 0x1F}, {'"', '"'}, {'\\', '\\'}, {0xD800, 0xDFFF}};
  std::set<uint16_t> taken_units;
  std::string taken_short;
  for (auto& [u, kid] : t.kids) {
    alts.push_back(spellings(u) + " " + kid.rule);
    taken_units.insert(u);
    if (!surrogate(u)) taken_raw.push_back({u, u});
    if (const char c = short_escape(u)) taken_short += c;
    if (u < 0xD800 || u > 0xDBFF) continue;
    // A raw character above U+FFFF is a high and a low unit at once.
    for (auto& [low, grandkid] : kid.kids) {
      if (low < 0xDC00 || low > 0xDFFF) continue;
      const uint32_t cp = 0x10000 + ((uint32_t(u) - 0xD800) << 10) + (low - 0xDC00);
      std::string raw;
      append_utf8(raw, cp);
      alts.push_back(quoted(raw) + " " + grandkid.rule);
      taken_raw.push_back({cp, cp});
    }
  }
  // One unit that no name with this prefix has next: the key differs from all of them.
  std::vector<std::string> other{gbnf_class(normalize_ranges(taken_raw, true))};
  std::vector<CodeRange> letters;
  for (const char c : std::string("\"\\/bfnrt"))
    if (taken_short.find(c) == std::string::npos) letters.push_back({uint8_t(c), uint8_t(c)});
  if (!letters.empty()) other.push_back(quoted("\\") + " " + cls(letters));
  const std::string hex = hex_except(taken_units);
  if (!hex.empty()) other.push_back(quoted("\\u") + " (" + hex + ")");
  alts.push_back(group(join(other, " | ")) + " json-char* " + quoted("\""));
  t.rule = add_rule("key", join(alts, " | "));
  return t.rule;
}

}  // namespace

const StringFormat* string_format(const std::string& name) {
  // RFC 3339: days by month, February 29 in leap years only (every 4th year, centuries every 400th).
  static const std::string date =
      "([0-9]{4} \"-\" ((\"0\" [13578] | \"1\" [02]) \"-\" (\"0\" [1-9] | [12] [0-9] | \"3\" [01]) | "
      "(\"0\" [469] | \"11\") \"-\" (\"0\" [1-9] | [12] [0-9] | \"30\") | \"02-\" (\"0\" [1-9] | \"1\" [0-9] | \"2\" [0-8])) | "
      "([0-9] [0-9] (\"0\" [48] | [2468] [048] | [13579] [26]) | ([02468] [048] | [13579] [26]) \"00\") \"-02-29\")";
  static const std::string hour = "([01] [0-9] | \"2\" [0-3])";
  static const std::string time = hour + " \":\" [0-5] [0-9] \":\" [0-5] [0-9] (\".\" [0-9]{1,6})? (\"Z\" | [+-] " +
                                  hour + " \":\" [0-5] [0-9])";
  // A practical address, as XGrammar writes one (RFC 5321/5322 without address literals or
  // comments): a dot-atom or a non-empty quoted local part, '@', then hostname labels of
  // letters, digits and inner hyphens joined by dots. The quoted part's '"' and '\' are JSON-escaped.
  static const std::string atext = cls({{'a', 'z'}, {'A', 'Z'}, {'0', '9'}, {'!', '!'}, {'#', '\''}, {'*', '+'},
                                        {'-', '-'}, {'/', '/'}, {'=', '='}, {'?', '?'}, {'^', '`'}, {'{', '~'}});
  static const std::string qtext = cls({{0x20, 0x21}, {0x23, 0x5B}, {0x5D, 0x7E}});
  static const std::string quote = quoted("\\\""), backslash = quoted("\\\\");
  static const std::string local = "(" + atext + "+ (\".\" " + atext + "+)* | " + quote + " (" + qtext + " | " +
                                   backslash + " (" + qtext + " | " + quote + " | " + backslash + "))+ " + quote + ")";
  static const std::string label = "[a-zA-Z0-9]+ (\"-\"+ [a-zA-Z0-9]+)*";
  static const std::string email = local + " \"@\" " + label + " (\".\" " + label + ")*";
  static const std::map<std::string, StringFormat> formats = {
      {"date", {date, 10, 10}},
      {"time", {time, 9, 21}},
      {"date-time", {date + " \"T\" " + time, 20, 32}},
      {"uuid", {"[0-9a-fA-F]{8} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{12}", 36, 36}},
      {"email", {email, 3, -1}}};
  auto it = formats.find(name);
  return it == formats.end() ? nullptr : &it->second;
}

std::string counted_string_gbnf(int64_t lo, int64_t hi, const std::string& name,
                               const std::function<std::string(const std::string&, const std::string&)>& add_rule) {
  const std::string hex2 = "[0-9a-fA-F]{2}";
  const std::string plain = add_rule(
      name + "-char", R"([^"\\\x00-\x1F] | "\\" (["\\/bfnrt] | "u" ([0-9a-cA-CeEfF] [0-9a-fA-F]{3} | [dD] [0-7] )" +
                          hex2 + "))");
  const std::string high = add_rule(name + "-high", R"("\\u" [dD] [89abAB] )" + hex2);
  const std::string low = add_rule(name + "-low", R"("\\u" [dD] [c-fC-F] )" + hex2);
  // A high escape right before a low one is their pair (one character), never two lone halves.
  const std::string pair = high + " " + low;
  const std::string any = add_rule(name + "-unit", join({plain, pair, high, low}, " | "));
  const auto up_to = [&](int64_t n) {
    return n < 0 ? any + "*" : n == 0 ? std::string("\"\"") : any + "{0," + std::to_string(n) + "}";
  };
  // Past the first lo characters, extra splits of a pair only add to the count: maxLength holds
  // exactly when the fewest-units reading fits. The first lo need the pairing enforced, so they
  // are a chain with two states: after a lone high escape (no low one may follow) or not.
  const int64_t rest = hi < 0 ? -1 : hi - lo;
  std::string after_other = add_rule(name + "-len", up_to(rest));
  std::string after_high =
      add_rule(name + "-len", rest == 0 ? "\"\""
                                        : "((" + join({plain, pair, high}, " | ") + ") " +
                                              up_to(rest < 0 ? -1 : rest - 1) + ")?");
  for (int64_t k = 0; k < lo; ++k) {
    const std::string a = add_rule(name + "-len", "(" + join({plain, pair, low}, " | ") + ") " + after_other +
                                                      " | " + high + " " + after_high);
    after_high = add_rule(name + "-len",
                          "(" + plain + " | " + pair + ") " + after_other + " | " + high + " " + after_high);
    after_other = a;
  }
  return "\"\\\"\" " + after_other + " \"\\\"\"";
}

std::string json_key_except_gbnf(const std::set<std::string>& names,
                                 const std::function<std::string(const std::string&, const std::string&)>& add_rule) {
  if (names.empty()) return "json-string";
  Trie root;
  for (const auto& name : names) {
    Trie* t = &root;
    for (size_t i = 0; i < name.size();) {
      const uint32_t cp = decode_utf8(name, i);
      if (cp <= 0xFFFF) {
        t = &t->kids[uint16_t(cp)];
      } else {
        t = &t->kids[uint16_t(0xD800 + ((cp - 0x10000) >> 10))];
        t = &t->kids[uint16_t(0xDC00 + ((cp - 0x10000) & 0x3FF))];
      }
    }
    t->end = true;
  }
  return quoted("\"") + " " + build(root, add_rule);
}

}  // namespace lite_llama::grammar

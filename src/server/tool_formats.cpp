#include "server/tool_formats.h"

#include <algorithm>
#include <random>

#include "core/error.h"
#include "grammar/gbnf_parser.h"
#include "grammar/json_schema.h"

namespace lite_llama::server {
namespace {

using ojson = nlohmann::ordered_json;

constexpr std::string_view kPythonTag = "<|python_tag|>", kMistralOpen = "[TOOL_CALLS]";
constexpr std::string_view kCallOpen = "<tool_call>", kCallClose = "</tool_call>";
constexpr const char* kProbeName = "lite_llama_probe_fn";

std::string_view trim_left(std::string_view s) {
  const size_t i = s.find_first_not_of(" \t\r\n");
  return i == std::string_view::npos ? std::string_view() : s.substr(i);
}

// End (one past) of the JSON value starting at s[i] ('{' or '['), by bracket depth outside
// strings; npos when it does not close.
size_t json_value_end(std::string_view s, size_t i) {
  int depth = 0;
  bool in_string = false;
  for (; i < s.size(); ++i) {
    const char c = s[i];
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    else if (c == '{' || c == '[') ++depth;
    else if ((c == '}' || c == ']') && --depth == 0) return i + 1;
  }
  return std::string_view::npos;
}

// `prefix` is a proper prefix of `word`.
bool partial(std::string_view prefix, std::string_view word) {
  return prefix.size() < word.size() && word.substr(0, prefix.size()) == prefix;
}

// {"name": ..., args_key: ...} -> a call, when the name is declared.
std::optional<ToolCall> call_from(const ojson& j, ToolFormat f, const std::vector<std::string>& names) {
  if (!j.is_object() || !j.contains("name") || !j["name"].is_string()) return std::nullopt;
  const std::string name = j["name"].get<std::string>();
  if (!names.empty() && std::find(names.begin(), names.end(), name) == names.end()) return std::nullopt;
  ojson args = ojson::object();
  for (const char* key : {"arguments", "parameters"})
    if (j.contains(key)) args = j[key];
  if (args.is_string()) {  // arguments given as JSON text
    args = ojson::parse(args.get<std::string>(), nullptr, false);
    if (args.is_discarded()) return std::nullopt;
  }
  if (!args.is_object()) return std::nullopt;
  return ToolCall{new_tool_call_id(f), name, args.dump()};
}

std::optional<std::vector<ToolCall>> parse_hermes(std::string_view text, const std::vector<std::string>& names) {
  std::vector<ToolCall> calls;
  size_t i = 0;
  for (;;) {
    i = text.find_first_not_of(" \t\r\n", i);
    if (i == std::string_view::npos) break;
    if (text.substr(i, kCallOpen.size()) != kCallOpen) {
      // The next call's opening tag cut short by max_tokens after whole calls.
      if (!calls.empty() && partial(text.substr(i), kCallOpen)) break;
      return std::nullopt;
    }
    const size_t end = text.find(kCallClose, i);
    // A call cut short by max_tokens has no closing tag, or part of one: parse what there is.
    const size_t body_end = end == std::string_view::npos ? text.size() : end;
    const size_t body = i + kCallOpen.size();
    std::string_view json_text = text.substr(body, body_end - body);
    if (const size_t lt = json_text.rfind('<');
        end == std::string_view::npos && lt != std::string_view::npos && partial(json_text.substr(lt), kCallClose))
      json_text = json_text.substr(0, lt);
    auto c = call_from(ojson::parse(json_text, nullptr, false), ToolFormat::Hermes, {});
    (void)names;  // Hermes blocks are explicit: a call to an undeclared name still reports it
    // A last call cut short mid-JSON after whole ones: the whole ones are the answer (its
    // markup would otherwise end up in the content).
    if (!c && end == std::string_view::npos && !calls.empty()) break;
    if (!c) return std::nullopt;
    calls.push_back(std::move(*c));
    i = end == std::string_view::npos ? text.size() : end + kCallClose.size();
  }
  if (calls.empty()) return std::nullopt;
  return calls;
}

// Calls written as JSON objects from text[i] on, `sep` between them, and `close` (0: none) after
// the last with only whitespace behind it; the text may also end after a call or a separator.
// cut_ok: it may end inside an object too (max_tokens cut it), and the whole calls before count.
std::optional<std::vector<ToolCall>> object_list(std::string_view text, size_t i, char sep, char close, bool cut_ok,
                                                 ToolFormat f, const std::vector<std::string>& names) {
  auto skip = [&](size_t k) { return text.find_first_not_of(" \t\r\n", k); };
  std::vector<ToolCall> calls;
  for (i = skip(i); i != std::string_view::npos; i = skip(i + 1)) {
    if (text[i] != '{') return std::nullopt;
    const size_t end = json_value_end(text, i);
    if (end == std::string_view::npos) {
      if (!cut_ok) return std::nullopt;
      break;
    }
    auto c = call_from(ojson::parse(text.substr(i, end - i), nullptr, false), f, names);
    if (!c) return std::nullopt;
    calls.push_back(std::move(*c));
    i = skip(end);
    if (i == std::string_view::npos) break;
    if (close && text[i] == close) {
      if (skip(i + 1) != std::string_view::npos) return std::nullopt;
      break;
    }
    if (text[i] != sep) return std::nullopt;
  }
  if (calls.empty()) return std::nullopt;
  return calls;
}

// Llama 3: one or more objects separated by ';' (vLLM's reading of several calls).
std::optional<std::vector<ToolCall>> parse_llama(std::string_view text, const std::vector<std::string>& names) {
  text = trim_left(text);
  if (text.starts_with(kPythonTag)) text = trim_left(text.substr(kPythonTag.size()));
  return object_list(text, 0, ';', 0, false, ToolFormat::Llama3Json, names);
}

// Mistral: [TOOL_CALLS] (a control token, usually gone from the text) then a JSON list of calls.
// A list cut short by max_tokens: the whole calls before the cut are the answer.
std::optional<std::vector<ToolCall>> parse_mistral(std::string_view text, const std::vector<std::string>& names) {
  text = trim_left(text);
  if (text.starts_with(kMistralOpen)) text = trim_left(text.substr(kMistralOpen.size()));
  if (text.empty() || text[0] != '[') return std::nullopt;
  return object_list(text, 1, ',', ']', true, ToolFormat::Mistral, names);
}

}  // namespace

const char* tool_format_name(ToolFormat f) {
  switch (f) {
    case ToolFormat::Hermes: return "hermes";
    case ToolFormat::Llama3Json: return "llama3_json";
    case ToolFormat::Mistral: return "mistral";
  }
  return "hermes";
}

ToolFormat detect_tool_format(const ProbeRender& render) {
  const std::string id = "abcdefghi";  // Mistral's templates insist on 9 letters or digits
  const ojson call = {{"id", id}, {"type", "function"},
                      {"function", {{"name", kProbeName}, {"arguments", "{\"x\": 1}"}}}};
  const ojson tool = {{"type", "function"},
                      {"function", {{"name", kProbeName}, {"description", "probe"},
                                    {"parameters", {{"type", "object"}, {"properties", {{"x", {{"type", "integer"}}}}}}}}}};
  const ojson extra = {{"tools", ojson::array({tool})}};
  std::vector<ChatMessage> msgs = {{"user", "u", "", "", ""}, {"assistant", "", "", ojson::array({call}).dump(), ""},
                                   {"tool", "r", "", "", id}};
  std::string text;
  for (int attempt = 0; attempt < 2 && text.empty(); ++attempt) {
    try {
      text = render(msgs, extra.dump());
    } catch (const std::exception&) {
      msgs.pop_back();  // some templates refuse a tool result in this place; the call is enough
    }
  }
  const size_t at = text.find(kProbeName);
  if (at == std::string::npos) return ToolFormat::Hermes;
  if (text.find(kCallOpen) != std::string::npos) return ToolFormat::Hermes;
  if (text.find(kMistralOpen) != std::string::npos) return ToolFormat::Mistral;
  // Llama 3.1/3.2 write {"name": "...", "parameters": ...} (3.1 may prefix <|python_tag|>).
  const std::string head = std::string("{\"name\": \"") + kProbeName + "\"";
  if (text.find(head) != std::string::npos) return ToolFormat::Llama3Json;
  return ToolFormat::Hermes;
}

std::string new_tool_call_id(ToolFormat f) {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  static const char* alnum = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  std::string id;
  if (f == ToolFormat::Mistral) {
    for (int i = 0; i < 9; ++i) id += alnum[rng() % 62];
    return id;
  }
  id = "call_";
  static const char* lower = "abcdefghijklmnopqrstuvwxyz0123456789";
  for (int i = 0; i < 24; ++i) id += lower[rng() % 36];
  return id;
}

int opens_tool_calls(ToolFormat f, std::string_view s) {
  if (s.empty()) return -1;
  if (f == ToolFormat::Llama3Json) {
    if (s[0] == '{' || s.starts_with(kPythonTag)) return 1;
    return partial(s, kPythonTag) ? -1 : 0;
  }
  if (f == ToolFormat::Mistral) {
    if (s.starts_with(kMistralOpen)) return 1;
    if (partial(s, kMistralOpen)) return -1;  // "[" may still be a list of calls or the tag
    if (s[0] != '[') return 0;
    const std::string_view rest = trim_left(s.substr(1));
    if (rest.empty()) return -1;
    return rest[0] == '{' ? 1 : 0;
  }
  return 0;  // Hermes blocks may follow text: the parser looks for them anywhere
}

std::optional<std::vector<ToolCall>> parse_tool_calls(ToolFormat f, std::string_view text,
                                                      const std::vector<std::string>& names) {
  switch (f) {
    case ToolFormat::Hermes: return parse_hermes(text, names);
    case ToolFormat::Llama3Json: return parse_llama(text, names);
    case ToolFormat::Mistral: return parse_mistral(text, names);
  }
  return std::nullopt;
}

std::string tool_calls_grammar(ToolFormat f, const ojson& tools, const std::string& named, bool parallel) {
  const char* args_key = f == ToolFormat::Llama3Json ? "parameters" : "arguments";
  std::string rules, alts;
  for (size_t i = 0; i < tools.size(); ++i) {
    const ojson& fn = tools[i]["function"];
    const std::string name = fn["name"].get<std::string>();
    if (!named.empty() && name != named) continue;
    const std::string start = "tool" + std::to_string(i);
    ojson params = fn.contains("parameters") ? fn["parameters"] : ojson::object();
    // Arguments are an object (the parser takes no other): {} alone would let any value through.
    if (params.empty()) params = {{"type", "object"}};
    try {
      rules += grammar::json_schema_rules(params, start + "-args");
    } catch (const Error& e) {
      fail("tool '{}' parameters: {}", name, e.what());
    }
    const std::string head = "{\"name\": " + ojson(name).dump() + ", \"" + args_key + "\": ";
    std::string open, close = "}";
    if (f == ToolFormat::Hermes) open = "<tool_call>\n", close = "}\n</tool_call>";
    rules += start + " ::= \"" + grammar::gbnf_escape(open + head) + "\" " + start + "-args \"" +
             grammar::gbnf_escape(close) + "\"\n";
    alts += (alts.empty() ? "" : " | ") + start;
  }
  std::string root;
  switch (f) {
    case ToolFormat::Hermes: root = std::string("call") + (parallel ? " (\"\\n\" call){0,7}" : ""); break;
    case ToolFormat::Llama3Json: root = "call"; break;
    case ToolFormat::Mistral: root = std::string("\"[\" call") + (parallel ? " (\", \" call){0,7}" : "") + " \"]\""; break;
  }
  std::string g = "root ::= " + root + "\ncall ::= " + alts + "\n" + rules + grammar::json_primitives_gbnf();
  grammar::compile_gbnf(g);  // throws naming what does not compile
  return g;
}

}  // namespace lite_llama::server

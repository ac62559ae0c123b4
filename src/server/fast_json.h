// A faster json::parse for request bodies. nlohmann's lexer handles a string one character at
// a time (with bookkeeping for error messages), about 6 ns a byte; a long chat history is
// mostly string bytes, which this parser copies in 8-byte words after one check per word.
#pragma once
#include <optional>
#include <string_view>

#include <nlohmann/json.hpp>

namespace lite_llama::server {

// The value nlohmann::json::parse(text) gives, or nullopt. Nullopt for all invalid JSON, but
// also for valid JSON this parser leaves to nlohmann: nesting deeper than max_depth, duplicate
// keys, a byte-order mark, numbers whose conversion over- or underflows. A caller falls back
// to json::parse on nullopt, which keeps every error message and edge case as it was.
std::optional<nlohmann::json> parse_json_fast(std::string_view text, int max_depth);

}  // namespace lite_llama::server

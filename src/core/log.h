// Minimal leveled logging to stderr; the CLI sets the level (-v / --quiet).
#pragma once
#include <fmt/format.h>

namespace lite_llama {

enum class LogLevel { Debug = 0, Info = 1, Warn = 2, Error = 3, Off = 4 };
void set_log_level(LogLevel l);
LogLevel log_level();
void log_write(LogLevel l, const std::string& msg);

template <typename... Args>
void log(LogLevel l, fmt::format_string<Args...> f, Args&&... args) {
  if (l >= log_level()) log_write(l, fmt::format(f, std::forward<Args>(args)...));
}
#define LL_DEBUG(...) ::lite_llama::log(::lite_llama::LogLevel::Debug, __VA_ARGS__)
#define LL_INFO(...) ::lite_llama::log(::lite_llama::LogLevel::Info, __VA_ARGS__)
#define LL_WARN(...) ::lite_llama::log(::lite_llama::LogLevel::Warn, __VA_ARGS__)

}  // namespace lite_llama

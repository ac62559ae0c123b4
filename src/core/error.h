// Library error type: every failure the user can cause (bad file, bad flag, bad request)
// is thrown as lite_llama::Error with a message naming the file, tensor or parameter at fault.
#pragma once
#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace lite_llama {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& msg) : std::runtime_error(msg) {}
};

template <typename... Args>
[[noreturn]] void fail(fmt::format_string<Args...> f, Args&&... args) {
  throw Error(fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace lite_llama

// Checks a user-facing condition; the message is only formatted on failure.
#define LL_CHECK(cond, ...)                 \
  do {                                      \
    if (!(cond)) ::lite_llama::fail(__VA_ARGS__); \
  } while (0)

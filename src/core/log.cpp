#include "core/log.h"

#include <atomic>
#include <cstdio>
#include <mutex>

namespace lite_llama {
namespace {
std::atomic<int> g_level{int(LogLevel::Info)};
std::mutex g_mu;
}  // namespace

void set_log_level(LogLevel l) { g_level = int(l); }
LogLevel log_level() { return LogLevel(g_level.load()); }

void log_write(LogLevel l, const std::string& msg) {
  static const char* kTag[] = {"debug", "info", "warn", "error"};
  std::lock_guard<std::mutex> lock(g_mu);
  std::fprintf(stderr, "[lite-llama %s] %s\n", kTag[int(l)], msg.c_str());
}

}  // namespace lite_llama

#pragma once
#include <chrono>

namespace lite_llama {

inline double now_ms() {
  using namespace std::chrono;
  return duration<double, std::milli>(steady_clock::now().time_since_epoch()).count();
}

}  // namespace lite_llama

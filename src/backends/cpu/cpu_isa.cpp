#include "backends/cpu/cpu_isa.h"

#include <fstream>

#include "core/error.h"

namespace lite_llama::cpu {
namespace {

#if defined(__x86_64__) || defined(__i386__)
bool has(const char* f) {
  __builtin_cpu_init();
  // __builtin_cpu_supports needs a string literal; the features used are listed here.
  const std::string s = f;
  if (s == "avx2") return __builtin_cpu_supports("avx2");
  if (s == "fma") return __builtin_cpu_supports("fma");
  if (s == "f16c") return __builtin_cpu_supports("f16c");
  if (s == "avx512f") return __builtin_cpu_supports("avx512f");
  if (s == "avx512bw") return __builtin_cpu_supports("avx512bw");
  if (s == "avx512vl") return __builtin_cpu_supports("avx512vl");
  if (s == "avx512dq") return __builtin_cpu_supports("avx512dq");
  if (s == "avx512vnni") return __builtin_cpu_supports("avx512vnni");
  if (s == "avxvnni") return __builtin_cpu_supports("avxvnni");
  return false;
}
#else
bool has(const char*) { return false; }
#endif

bool has_avx2() { return has("avx2") && has("fma") && has("f16c"); }
bool has_avx512() {
  return has_avx2() && has("avx512f") && has("avx512bw") && has("avx512vl") && has("avx512dq") &&
         has("avx512vnni");
}

}  // namespace

CpuIsa detect_cpu_isa() {
  if (has_avx512()) return CpuIsa::Avx512;
  if (has_avx2()) return CpuIsa::Avx2;
  return CpuIsa::Generic;
}

CpuIsa choose_cpu_isa(CpuIsaChoice want) {
  switch (want) {
    case CpuIsaChoice::Auto: return detect_cpu_isa();
    case CpuIsaChoice::Generic: return CpuIsa::Generic;
    case CpuIsaChoice::Avx2:
      LL_CHECK(has_avx2(), "cpu isa avx2: this CPU lacks AVX2, FMA or F16C");
      return CpuIsa::Avx2;
    case CpuIsaChoice::Avx512:
      LL_CHECK(has_avx512(), "cpu isa avx512: this CPU lacks AVX-512 F/BW/VL/DQ/VNNI");
      return CpuIsa::Avx512;
  }
  return CpuIsa::Generic;
}

const char* cpu_isa_name(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::Avx512: return "avx512";
    case CpuIsa::Avx2: return "avx2";
    default: return "generic";
  }
}

std::string cpu_description() {
  std::string model = "unknown CPU";
  std::ifstream f("/proc/cpuinfo");
  for (std::string line; std::getline(f, line);) {
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) model = line.substr(line.find_first_not_of(" \t", colon + 1));
      break;
    }
  }
  std::string yes, no;
  for (const char* feat : {"avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vnni", "avxvnni"}) {
    std::string& list = has(feat) ? yes : no;
    list += (list.empty() ? "" : " ") + std::string(feat);
  }
  return model + " (" + (yes.empty() ? "none of the SIMD features" : yes) +
         (no.empty() ? "" : "; no " + no) + ")";
}

}  // namespace lite_llama::cpu

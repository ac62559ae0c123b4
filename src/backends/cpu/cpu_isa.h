// Which vector instruction set the CPU kernels run with, chosen at run time: the kernels are
// built once per instruction set (kernels_avx2.cpp, kernels_avx512.cpp, kernels_generic.cpp,
// each with its own compiler flags), so one binary runs at full width on any x86-64 machine.
#pragma once
#include <string>

#include "lite_llama/backend_options.h"

namespace lite_llama::cpu {

enum class CpuIsa { Generic, Avx2, Avx512 };

// The widest instruction set this CPU (and OS) runs that the build has kernels for.
CpuIsa detect_cpu_isa();
// `want` (CpuTuning::isa) resolved against the machine; a forced set the CPU lacks is an error.
CpuIsa choose_cpu_isa(CpuIsaChoice want);
const char* cpu_isa_name(CpuIsa isa);
// The CPU's model name and the features the kernels care about, e.g.
// "AMD EPYC (avx2 fma f16c; no avx512f)".
std::string cpu_description();

}  // namespace lite_llama::cpu

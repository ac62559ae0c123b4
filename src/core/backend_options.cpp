// Flag spellings of the public backend options (include/lite_llama/backend_options.h).
#include "lite_llama/backend_options.h"

#include "core/error.h"

namespace lite_llama {

DeviceKind parse_device(const std::string& s) {
  if (s == "auto") return DeviceKind::Auto;
  if (s == "cpu") return DeviceKind::Cpu;
  if (s == "cuda") return DeviceKind::Cuda;
  fail("--device must be auto, cpu or cuda, got '{}'", s);
}

ActType parse_act_type(const std::string& s) {
  if (s == "auto") return ActType::Auto;
  if (s == "bf16") return ActType::BF16;
  if (s == "fp16") return ActType::FP16;
  fail("--dtype must be auto, bf16 or fp16, got '{}'", s);
}

QuantMode parse_quant_mode(const std::string& s) {
  if (s == "auto") return QuantMode::Auto;
  if (s == "none") return QuantMode::None;
  if (s == "int8") return QuantMode::Int8;
  if (s == "int4") return QuantMode::Int4;
  if (s == "fp8") return QuantMode::Fp8;
  fail("--quantize must be auto, none, int8, int4 or fp8, got '{}'", s);
}

CpuIsaChoice parse_cpu_isa(const std::string& s) {
  if (s == "auto") return CpuIsaChoice::Auto;
  if (s == "generic") return CpuIsaChoice::Generic;
  if (s == "avx2") return CpuIsaChoice::Avx2;
  if (s == "avx512") return CpuIsaChoice::Avx512;
  fail("LITE_LLAMA_CPU_ISA must be auto, generic, avx2 or avx512, got '{}'", s);
}

const char* device_kind_name(DeviceKind d) {
  switch (d) {
    case DeviceKind::Auto: return "auto";
    case DeviceKind::Cpu: return "cpu";
    case DeviceKind::Cuda: return "cuda";
  }
  return "?";
}

const char* act_type_name(ActType a) {
  return a == ActType::Auto ? "auto" : a == ActType::BF16 ? "bf16" : "fp16";
}

const char* quant_mode_name(QuantMode m) {
  switch (m) {
    case QuantMode::Auto: return "auto";
    case QuantMode::None: return "none";
    case QuantMode::Int8: return "int8";
    case QuantMode::Int4: return "int4";
    case QuantMode::Fp8: return "fp8";
  }
  return "?";
}

}  // namespace lite_llama

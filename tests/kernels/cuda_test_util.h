// Helpers shared by the CUDA kernel tests: every CUDA op runs on inputs that both backends see
// identically (random values rounded to bf16, which fp16 also holds exactly in the range used
// here), and its result is compared with the CPU backend (fp32) on those same inputs.
//
// Tolerances. The CUDA backend computes in fp32 and rounds activations to 16 bits once per
// output element: relative error <= u with u = 2^-8 (bf16, 8 significant bits) or 2^-11
// (fp16). Over many elements the rounding errors are close to uniform, so the relative L2 error
// of a tensor is ~u/sqrt(3) (2.3e-3 for bf16) and the largest error is <= u * max|ref| (3.9e-3
// for bf16). The default bounds leave 3-4x room for ops that round twice (a residual and an
// output, a norm then a weight product); a missing or misplaced element, a wrong row or head
// offset, or an unwritten (NaN-poisoned) element produces errors of order 1.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "backends/factory.h"
#include "core/dtype.h"
#include "core/half.h"
#include "core/quant.h"
#include "core/tensor.h"
#include "ops/ops.h"

namespace lite_llama::kt {

// Relative-L2 and max-abs bounds (max|got - want| / max|want|).
struct Tol {
  double rel_l2;
  double max_rel;
};

// One 16-bit rounding per element, with room for a second (see the file comment).
inline Tol act_tol(DType act) { return act == DType::F16 ? Tol{2.5e-3, 8e-3} : Tol{1e-2, 3e-2}; }
// F32 outputs (logits): no output rounding; only the fp32 summation order differs (tensor-core
// or warp-shuffle trees against the CPU's SIMD lanes), ~1e-5 relative at K = 3072. The bound
// still catches an output accidentally rounded to 16 bits (rel-L2 ~2e-3 for bf16).
inline Tol f32_tol() { return Tol{1e-3, 4e-3}; }
inline double unit_roundoff(DType act) { return act == DType::F16 ? 1.0 / 2048 : 1.0 / 256; }

// Rounds to the activation type and back: the value a 16-bit device tensor holds.
inline float round_to(DType t, float v) {
  if (t == DType::BF16) return bf16_to_f32(f32_to_bf16(v));
  if (t == DType::F16) return f16_to_f32(f32_to_f16(v));
  return v;
}

// Fast deterministic N(0, sd)-like values: splitmix64 seeded from `rng`, each output the sum of
// four 16-bit uniforms (Irwin-Hall, rescaled to sd; tails end at 3.46 sd). std::normal_distribution
// would spend seconds on the 10^7-10^8 values of the long-context KV pools.
inline std::vector<float> randn(std::mt19937& rng, size_t n, float sd = 1.0f) {
  uint64_t state = (uint64_t(rng()) << 32) ^ rng();
  const float k = sd * 1.7320508f / 65536.0f;  // sqrt(3): Irwin-Hall(4) has variance 1/3
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    const float s = float(z & 0xffff) + float((z >> 16) & 0xffff) + float((z >> 32) & 0xffff) +
                    float(z >> 48) + 2.0f - 131072.0f;  // sum of (u + 0.5) - 2 * 65536
    v[i] = s * k;
  }
  return v;
}

// Random values rounded to bf16 and then to `act`: exactly representable on both sides.
inline std::vector<float> rand_act(std::mt19937& rng, size_t n, DType act, float sd = 1.0f) {
  std::vector<float> v = randn(rng, n, sd);
  for (auto& x : v) x = round_to(act, round_to(DType::BF16, x));
  return v;
}

// ---------------------------------------------------------------------------------------------
// Backends.

// Skips visibly where no GPU is present (CI compiles these tests without one).
#define LL_REQUIRE_CUDA()                                                   \
  do {                                                                      \
    if (!::lite_llama::cuda_available()) GTEST_SKIP() << "no CUDA device"; \
  } while (0)

inline BackendOptions gpu_options(const std::string& dtype, CudaTuning tuning = {}) {
  BackendOptions o;
  o.device = DeviceKind::Cuda;
  o.dtype = parse_act_type(dtype);
  o.cuda = tuning;
  return o;
}
inline std::unique_ptr<ops::Backend> make_gpu(const std::string& dtype, const CudaTuning& tuning = {}) {
  return make_backend(gpu_options(dtype, tuning));
}
// A GPU backend with the weights quantised at load (--quantize mode).
inline std::unique_ptr<ops::Backend> make_gpu_quantized(const std::string& dtype, const std::string& mode,
                                                        const CudaTuning& tuning = {}) {
  BackendOptions o = gpu_options(dtype, tuning);
  o.quantize = parse_quant_mode(mode);
  return make_backend(o);
}

// The fp32 reference (CpuTuning's int8- and int16-activation paths are not fp32 references).
inline std::unique_ptr<ops::Backend> make_cpu() {
  BackendOptions o;
  o.device = DeviceKind::Cpu;
  o.cpu.int16_activations = false;
  return make_backend(o);
}

// Fixture parameterised by the CUDA activation type ("bf16" / "fp16"): skips without a GPU.
class CudaVsCpu : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    LL_REQUIRE_CUDA();
    gpu = make_gpu(GetParam());
    cpu = make_cpu();
    act = gpu->act_dtype();
  }
  std::unique_ptr<ops::Backend> gpu, cpu;
  DType act = DType::BF16;
  std::vector<Buffer> keep;  // prepared weights of either backend
};

inline std::string dtype_param_name(const ::testing::TestParamInfo<std::string>& i) {
  return i.param;
}

#define LL_INSTANTIATE_DTYPES(suite)                                                   \
  INSTANTIATE_TEST_SUITE_P(Act, suite, ::testing::Values(std::string("bf16"),         \
                                                         std::string("fp16")),         \
                           ::lite_llama::kt::dtype_param_name)

// ---------------------------------------------------------------------------------------------
// Device tensors.

// An owning device tensor: `t` views `buf`.
struct DevTensor {
  Buffer buf;
  Tensor t;
};

inline DevTensor dev_alloc(ops::Backend& be, DType dt, std::initializer_list<int64_t> dims) {
  Tensor shape(nullptr, dt, dims, be.device());
  DevTensor d;
  d.buf = be.alloc(std::max<size_t>(shape.nbytes(), 16));
  d.t = shape;
  d.t.data = d.buf.data();
  return d;
}

// Host floats -> bytes of type dt (F32, BF16 or F16).
inline std::vector<uint8_t> encode(const std::vector<float>& v, DType dt) {
  std::vector<uint8_t> b(v.size() * (dt == DType::F32 ? 4 : 2));
  for (size_t i = 0; i < v.size(); ++i) {
    if (dt == DType::F32) {
      std::memcpy(&b[i * 4], &v[i], 4);
    } else {
      const uint16_t h = dt == DType::BF16 ? f32_to_bf16(v[i]) : f32_to_f16(v[i]);
      std::memcpy(&b[i * 2], &h, 2);
    }
  }
  return b;
}

inline std::vector<float> decode(const std::vector<uint8_t>& b, DType dt) {
  const size_t es = dt == DType::F32 ? 4 : 2;
  std::vector<float> v(b.size() / es);
  for (size_t i = 0; i < v.size(); ++i) {
    if (dt == DType::F32) {
      std::memcpy(&v[i], &b[i * 4], 4);
    } else {
      uint16_t h;
      std::memcpy(&h, &b[i * 2], 2);
      v[i] = dt == DType::BF16 ? bf16_to_f32(h) : f16_to_f32(h);
    }
  }
  return v;
}

// Uploads host floats as a device tensor of type dt (values must be representable in dt).
inline DevTensor dev_from(ops::Backend& be, const std::vector<float>& v, DType dt,
                          std::initializer_list<int64_t> dims) {
  DevTensor d = dev_alloc(be, dt, dims);
  EXPECT_EQ(size_t(d.t.numel()), v.size()) << "dev_from: shape " << d.t.shape_str();
  const std::vector<uint8_t> b = encode(v, dt);
  be.copy_to_device(d.t.data, b.data(), b.size());
  return d;
}

inline std::vector<uint8_t> to_host_bytes(ops::Backend& be, const Tensor& t) {
  std::vector<uint8_t> b(t.nbytes());
  be.copy_to_host(b.data(), t.data, b.size());  // synchronises the backend's stream
  return b;
}

inline std::vector<float> to_host(ops::Backend& be, const Tensor& t) {
  return decode(to_host_bytes(be, t), t.dtype);
}

// Device int32 array.
struct DevInts {
  Buffer buf;
  int32_t* ptr() const { return buf.as<int32_t>(); }
};

inline DevInts dev_ints(ops::Backend& be, const std::vector<int32_t>& v) {
  DevInts d{be.alloc(std::max<size_t>(v.size() * 4, 16))};
  if (!v.empty()) be.copy_to_device(d.ptr(), v.data(), v.size() * 4);
  return d;
}

inline std::vector<int32_t> ints_to_host(ops::Backend& be, const int32_t* p, size_t n) {
  std::vector<int32_t> v(n);
  be.copy_to_host(v.data(), p, n * 4);
  return v;
}

// All bytes 0xFF: NaN in bf16, fp16 and fp32 (and -1 as int32), so an element the kernel fails
// to write shows up as non-finite.
inline void poison(ops::Backend& be, void* p, size_t bytes) {
  std::vector<uint8_t> ff(bytes, 0xFF);
  be.copy_to_device(p, ff.data(), bytes);
}
inline void poison(ops::Backend& be, const Tensor& t) { poison(be, t.data, t.nbytes()); }

// F32 host vector uploaded as is (norm weights, rope tables, biases), the way the model loader
// does it (Backend::upload). upload() copies with a synchronous cudaMemcpy on the legacy default
// stream while the ops run on a non-blocking stream, so the caller settles the device before
// use (see settle()).
inline Tensor upload_f32(ops::Backend& be, std::vector<float>& v, std::initializer_list<int64_t> dims,
                         std::vector<Buffer>& keep) {
  return be.upload(Tensor(v.data(), DType::F32, dims), keep);
}

// Waits for every upload of the device (upload/prepare_* use cudaMemcpy on the default stream,
// whose DMA from pageable memory may still be in flight when it returns) and the backend stream.
void settle(ops::Backend& be);

inline Tensor host_f32(std::vector<float>& v, std::initializer_list<int64_t> dims) {
  return Tensor(v.data(), DType::F32, dims);
}

// ---------------------------------------------------------------------------------------------
// Comparisons.

struct ErrStats {
  double rel_l2 = 0, max_abs = 0, ref_max = 0;
  size_t worst = 0, nonfinite = 0, first_nonfinite = 0;
};

inline ErrStats err_stats(const float* got, const float* want, size_t n) {
  ErrStats s;
  double num = 0, den = 0;
  for (size_t i = 0; i < n; ++i) {
    if (!std::isfinite(got[i]) || !std::isfinite(want[i])) {
      if (s.nonfinite++ == 0) s.first_nonfinite = i;
      continue;
    }
    const double d = double(got[i]) - double(want[i]);
    num += d * d;
    den += double(want[i]) * want[i];
    if (std::fabs(d) > s.max_abs) s.max_abs = std::fabs(d), s.worst = i;
    s.ref_max = std::max(s.ref_max, std::fabs(double(want[i])));
  }
  s.rel_l2 = den > 0 ? std::sqrt(num / den) : std::sqrt(num);
  return s;
}

// With LL_KT_STATS=1 in the environment, each test prints the largest fraction of its bounds
// that any comparison used (to see the margins the tolerances leave).
void note_margin(double rel_l2_frac, double max_frac);

// rel-L2 <= tol.rel_l2 and max|got - want| <= tol.max_rel * max|want|, all finite.
inline ::testing::AssertionResult close(const float* got, const float* want, size_t n, Tol tol) {
  const ErrStats s = err_stats(got, want, n);
  if (!s.nonfinite && s.ref_max > 0) note_margin(s.rel_l2 / tol.rel_l2, s.max_abs / (tol.max_rel * s.ref_max));
  if (s.nonfinite)
    return ::testing::AssertionFailure()
           << s.nonfinite << " of " << n << " elements non-finite (unwritten?), first at "
           << s.first_nonfinite << ": got " << got[s.first_nonfinite] << " want "
           << want[s.first_nonfinite];
  const double max_ok = tol.max_rel * (s.ref_max > 0 ? s.ref_max : 1e-30);
  if (s.rel_l2 > tol.rel_l2 || s.max_abs > max_ok)
    return ::testing::AssertionFailure()
           << "rel_l2 " << s.rel_l2 << " (bound " << tol.rel_l2 << "), max_abs " << s.max_abs
           << " (bound " << max_ok << " = " << tol.max_rel << " * max|ref| " << s.ref_max
           << ") at element " << s.worst << ": got " << got[s.worst] << " want "
           << want[s.worst] << " (n = " << n << ")";
  return ::testing::AssertionSuccess();
}

inline ::testing::AssertionResult close(const std::vector<float>& got,
                                        const std::vector<float>& want, Tol tol) {
  if (got.size() != want.size())
    return ::testing::AssertionFailure()
           << "size " << got.size() << " != reference size " << want.size();
  return close(got.data(), want.data(), got.size(), tol);
}

// Rows of width `cols` checked one by one (each against its own max|ref|), so that a wrong small
// row is not hidden by a large one; returns the first failure.
inline ::testing::AssertionResult close_rows(const std::vector<float>& got,
                                             const std::vector<float>& want, size_t cols, Tol tol,
                                             const char* row_name = "row") {
  if (got.size() != want.size() || cols == 0 || got.size() % cols)
    return ::testing::AssertionFailure() << "sizes " << got.size() << " / " << want.size();
  for (size_t r = 0; r < got.size() / cols; ++r) {
    auto res = close(got.data() + r * cols, want.data() + r * cols, cols, tol);
    if (!res) return ::testing::AssertionFailure() << row_name << " " << r << ": " << res.message();
  }
  return ::testing::AssertionSuccess();
}

// Bit-exact expectation: got == want after rounding want to the device type.
inline ::testing::AssertionResult equal_rounded(const std::vector<float>& got,
                                                const std::vector<float>& want, DType dt) {
  if (got.size() != want.size())
    return ::testing::AssertionFailure() << "size " << got.size() << " != " << want.size();
  for (size_t i = 0; i < got.size(); ++i) {
    const float w = round_to(dt, want[i]);
    if (!(got[i] == w))
      return ::testing::AssertionFailure()
             << "element " << i << ": got " << got[i] << " want " << w << " (unrounded "
             << want[i] << ")";
  }
  return ::testing::AssertionSuccess();
}

// Distinct random indices in [0, n), shuffled.
inline std::vector<int32_t> distinct(std::mt19937& rng, int n, int count) {
  std::vector<int32_t> p(static_cast<size_t>(n));
  std::iota(p.begin(), p.end(), 0);
  std::shuffle(p.begin(), p.end(), rng);
  p.resize(static_cast<size_t>(count));
  return p;
}

// RoPE cos/sin table [npos, rot] as src/model/decoder.cpp builds it (fp32 angle, then cos/sin
// rounded once).
inline std::vector<float> rope_table(int rot, int64_t npos, double theta) {
  std::vector<float> inv(size_t(rot / 2));
  for (int i = 0; i < rot / 2; ++i) inv[size_t(i)] = float(1.0 / std::pow(theta, 2.0 * i / rot));
  std::vector<float> t(size_t(npos * rot));
  for (int64_t p = 0; p < npos; ++p)
    for (int i = 0; i < rot / 2; ++i) {
      const double a = double(float(p) * inv[size_t(i)]);
      t[size_t(p * rot + i)] = float(std::cos(a));
      t[size_t(p * rot + rot / 2 + i)] = float(std::sin(a));
    }
  return t;
}

}  // namespace lite_llama::kt

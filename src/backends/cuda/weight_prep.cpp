#include "backends/cuda/weight_prep.h"

#include <algorithm>
#include <thread>

#include "backends/cuda/cuda_check.h"
#include "core/half.h"
#include "core/quant.h"

namespace lite_llama::cuda {

Tensor WeightPrep::matrix(const std::vector<Tensor>& parts, int64_t N, int64_t K, bool embedding,
                          std::vector<Buffer>& keep) {
  check_not_prequantized(parts);
  if (auto f = explicit_format(K, embedding)) {
    // Upload as 16-bit, quantise on the device (fast, and no host copy of the model).
    Tensor t = upload_16bit(parts, N, K, keep);
    return quantize_on_device(t, *f, keep);
  }
  if (auto f = file_format(parts, K)) return upload_gq(parts, *f, N, K, keep, true);
  return upload_16bit(parts, N, K, keep);
}

// The one GQ format that holds every part exactly (GGUF blocks, GQ checkpoints), where the
// checkpoint's quantisation is kept (no --quantize).
std::optional<GqFormat> WeightPrep::file_format(const std::vector<Tensor>& parts, int64_t K) const {
  if (mode_ != QuantMode::Auto) return std::nullopt;
  std::vector<DType> types;
  for (const Tensor& p : parts) types.push_back(p.dtype);
  const std::optional<GqFormat> f = gq_common_format(types);
  return f && gq_row_ok(*f, K) ? f : std::nullopt;
}

// Every part repacked into format f (file_format), fused into one [N, K] matrix.
Tensor WeightPrep::upload_gq(const std::vector<Tensor>& parts, GqFormat f, int64_t N, int64_t K,
                             std::vector<Buffer>& keep, bool for_linear) {
  Buffer b = alloc_gq(f, N, K, for_linear);
  size_t off = 0;
  for (const Tensor& p : parts) {
    upload_rows(p, b.as<uint8_t>() + off, f.row_bytes(K),
                [&](const void* src, void* dst) { to_gq_row(p.dtype, src, f, dst, K); });
    off += f.row_bytes(K) * size_t(p.rows());
  }
  return gq_matrix(std::move(b), f, N, K, keep, for_linear);
}

void WeightPrep::check_not_prequantized(const std::vector<Tensor>& parts) const {
  const bool prequantized = std::any_of(parts.begin(), parts.end(), [](const Tensor& p) { return is_gq(p.dtype); });
  LL_CHECK(!(prequantized && mode_ != QuantMode::Auto && mode_ != QuantMode::None),
           "--quantize {}: the checkpoint is already quantised ({}); leave --quantize out",
           quant_mode_name(mode_), dtype_name(parts[0].dtype));
}

Tensor WeightPrep::experts_matrix(const std::vector<Tensor>& parts, int64_t N, int64_t K, std::vector<Buffer>& keep) {
  check_not_prequantized(parts);
  // The file's own int8 / int4 / fp8 rows stay as they are.
  if (const auto f = file_format(parts, K)) return upload_gq(parts, *f, N, K, keep, false);
  return experts_matrix(upload_16bit(parts, N, K, keep), keep);
}

Tensor WeightPrep::experts_matrix(const Tensor& t, std::vector<Buffer>& keep) {
  // --quantize int8 / int4 / fp8: the dense weights' format (int8 and fp8 per channel, int4 in
  // groups of 128 where K allows).
  const std::optional<GqFormat> f = explicit_format(t.cols(), false);
  return f ? quantize_on_device(t, *f, keep, false) : t;
}

Tensor WeightPrep::bias(const Tensor& bias, std::vector<Buffer>& keep) {
  LL_CHECK(bias.dtype == DType::F32, "a linear's bias must be F32 before conversion, got {}", dtype_name(bias.dtype));
  const int64_t n = bias.numel();
  Buffer bb = dev_.alloc(size_t(n) * 2);
  LL_CUDA(convert_f32(dev_.act(), bias.ptr<float>(), bb.data(), size_t(n), dev_.stream()));
  Tensor t(bb.data(), dev_.act_dtype(), {n}, Device::CUDA);
  keep.push_back(std::move(bb));
  dev_.synchronize();
  return t;
}

Buffer WeightPrep::random_16bit(int64_t rows, int64_t cols, uint64_t seed, float scale) {
  Buffer b = dev_.alloc(size_t(rows * cols) * 2);
  LL_CUDA(random_fill(dev_.act(), b.data(), size_t(rows * cols), seed, scale, dev_.stream()));
  dev_.synchronize();
  return b;
}

Tensor WeightPrep::random(int64_t rows, int64_t cols, uint64_t seed, float scale, bool embedding,
                          std::vector<Buffer>& keep) {
  Buffer b = random_16bit(rows, cols, seed, scale);
  Tensor t(b.data(), dev_.act_dtype(), {rows, cols}, Device::CUDA);
  if (auto f = explicit_format(cols, embedding)) return quantize_on_device(t, *f, keep);
  keep.push_back(std::move(b));
  return t;
}

// The format --quantize int8/int4/fp8 gives a matrix with rows of K (embeddings stay int8 under
// int4: the tied LM head is where 4 bits cost the most accuracy).
std::optional<GqFormat> WeightPrep::explicit_format(int64_t K, bool embedding) const {
  switch (mode_) {
    case QuantMode::Int8: return GqFormat{GqKind::Int8, 0};
    case QuantMode::Fp8: return GqFormat{GqKind::Fp8, 0};
    case QuantMode::Int4:
      if (embedding) return GqFormat{GqKind::Int8, 0};
      for (int g : {128, 64, 32})
        if (K % g == 0) return GqFormat{GqKind::Int4, g};
      return std::nullopt;
    default: return std::nullopt;
  }
}

// Host tensor of any supported storage type -> 16-bit rows on the device.
void WeightPrep::upload_rows(const Tensor& host, uint8_t* dst) {
  const int64_t cols = host.cols();
  if (host.dtype == dev_.act_dtype()) {
    dev_.copy_sync(dst, host.data, host.nbytes());
    return;
  }
  const bool bf16 = dev_.act() == Act::BF16;
  upload_rows(host, dst, size_t(cols) * 2, [&](const void* src, void* out) {
    thread_local std::vector<float> f;  // one row of floats per uploading thread
    f.resize(static_cast<size_t>(cols));
    dequantize_row(host.dtype, src, f.data(), cols);
    auto* o = static_cast<uint16_t*>(out);
    for (int64_t c = 0; c < cols; ++c) o[c] = bf16 ? f32_to_bf16(f[size_t(c)]) : f32_to_f16(f[size_t(c)]);
  });
}

// Host rows converted by `convert(src row, dst row of out_rb bytes)` on a few threads, uploaded
// in chunks so the host never holds a converted copy of the whole model.
template <typename Convert>
void WeightPrep::upload_rows(const Tensor& host, uint8_t* dst, size_t out_rb, Convert&& convert) {
  const int64_t rows = host.rows();
  const int64_t chunk = std::max<int64_t>(1, int64_t(32u << 20) / int64_t(out_rb));
  std::vector<uint8_t> buf(size_t(std::min(chunk, rows)) * out_rb);
  const int nthreads = int(std::max(1u, std::min(8u, std::thread::hardware_concurrency())));
  for (int64_t r0 = 0; r0 < rows; r0 += chunk) {
    const int64_t n = std::min(chunk, rows - r0);
    std::vector<std::thread> pool;
    for (int ti = 0; ti < nthreads; ++ti)
      pool.emplace_back([&, ti] {
        for (int64_t r = ti; r < n; r += nthreads) convert(host.row(r0 + r), buf.data() + size_t(r) * out_rb);
      });
    for (auto& th : pool) th.join();
    dev_.copy_sync(dst + size_t(r0) * out_rb, buf.data(), size_t(n) * out_rb);
  }
}

// Every part converted to the activation type, fused into one [N, K] matrix.
Tensor WeightPrep::upload_16bit(const std::vector<Tensor>& parts, int64_t N, int64_t K, std::vector<Buffer>& keep) {
  Buffer b = dev_.alloc(size_t(N) * size_t(K) * 2);
  size_t off = 0;
  for (const Tensor& p : parts) {
    upload_rows(p, b.as<uint8_t>() + off);
    off += size_t(p.numel()) * 2;
  }
  Tensor t(b.data(), dev_.act_dtype(), {N, K}, Device::CUDA);
  keep.push_back(std::move(b));
  return t;
}

// 16-bit device matrix `t` (owned by the last buffer in keep, or by the caller) -> format f.
Tensor WeightPrep::quantize_on_device(const Tensor& t, GqFormat f, std::vector<Buffer>& keep, bool for_linear) {
  const int64_t N = t.rows(), K = t.cols();
  LL_CHECK(gq_row_ok(f, K), "--quantize {}: rows of {} weights do not fit its groups", quant_mode_name(mode_), K);
  Buffer b = alloc_gq(f, N, K, for_linear);
  LL_CUDA(quantize_gq(dev_.act(), GqArgs{int(f.kind), f.group, f.row_bytes(K)}, t.data, b.data(), int(N), int(K),
                      dev_.stream()));
  dev_.synchronize();
  if (!keep.empty() && keep.back().data() == t.data) keep.pop_back();  // the 16-bit copy
  return gq_matrix(std::move(b), f, N, K, keep, for_linear);
}

// for_linear: room for the fp32 row scales of CudaLinear's fp8 GEMM where it takes them.
Buffer WeightPrep::alloc_gq(GqFormat f, int64_t N, int64_t K, bool for_linear) {
  const bool scales = for_linear && linear_.fp8_row_scales(f, K);
  return dev_.alloc(f.row_bytes(K) * size_t(N) + (scales ? size_t(N) * sizeof(float) : 0));
}

// A GQ matrix in `b` (from alloc_gq), kept alive by `keep`. for_linear: CudaLinear will run it
// (its dequantise and int8-activation scratch, fp8 row scales); the MoE experts' kernels need none.
Tensor WeightPrep::gq_matrix(Buffer b, GqFormat f, int64_t N, int64_t K, std::vector<Buffer>& keep,
                             bool for_linear) {
  if (for_linear) linear_.add_gq_weight(f);
  Tensor q(b.data(), gq_dtype(f), {N, K}, Device::CUDA);
  if (for_linear && linear_.fp8_row_scales(f, K)) {
    auto* scales = reinterpret_cast<float*>(b.as<uint8_t>() + f.row_bytes(K) * size_t(N));
    LL_CUDA(gq_row_scales(b.data(), f.row_bytes(K), f.code_bytes(K), int(N), scales, dev_.stream()));
  }
  keep.push_back(std::move(b));
  return q;
}

}  // namespace lite_llama::cuda

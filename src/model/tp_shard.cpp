#include "model/tp_shard.h"

#include <cstring>

#include "core/error.h"
#include "core/gq.h"

namespace lite_llama {
namespace {

int64_t kv_heads_local(const ModelConfig& c, int n) {
  return c.num_kv_heads >= n ? c.num_kv_heads / n : 1;
}

// Rows [r0, r0 + n) of a matrix or elements of a vector: a view.
Tensor take_rows(const Tensor& t, int64_t r0, int64_t n) {
  Tensor v = t;
  v.shape[0] = n;
  if (t.data) v.data = static_cast<uint8_t*>(t.data) + size_t(r0) * (t.ndim == 1 ? row_bytes(t.dtype, 1) : t.row_nbytes());
  return v;
}

// Columns [c0, c0 + n) of a matrix, copied (whole blocks of a block-quantised type).
Tensor take_cols(const Tensor& t, int64_t c0, int64_t n, const std::string& name, std::vector<Buffer>& keep) {
  Tensor v(nullptr, t.dtype, {t.rows(), n}, t.device);
  if (!t.data) return v;
  const int block = dtype_info(t.dtype).block_size;
  LL_CHECK(!is_gq(t.dtype) && t.dtype != DType::F8_E4M3 && c0 % block == 0 && n % block == 0,
           "tensor parallelism cannot split '{}' ({}) by columns at {}: use an unquantised checkpoint or "
           "--quantize after loading", name, dtype_name(t.dtype), c0);
  const size_t off = row_bytes(t.dtype, c0), width = row_bytes(t.dtype, n);
  Buffer b = host_buffer(width * size_t(t.rows()));
  for (int64_t r = 0; r < t.rows(); ++r)
    std::memcpy(b.as<uint8_t>() + size_t(r) * width, static_cast<const uint8_t*>(t.row(r)) + off, width);
  v.data = b.data();
  keep.push_back(std::move(b));
  return v;
}

// The rank's vocabulary rows, then zero rows up to `table` (also where V is not a multiple).
Tensor take_vocab(const Tensor& t, int64_t v0, int64_t rows, int64_t table, std::vector<Buffer>& keep) {
  Tensor v(nullptr, t.dtype, {table, t.cols()}, t.device);
  if (!t.data) return v;
  const int64_t have = std::max<int64_t>(0, std::min(rows, t.rows() - v0));
  Buffer b = host_buffer(size_t(table) * t.row_nbytes());
  std::memset(b.data(), 0, b.size());
  if (have > 0) std::memcpy(b.data(), t.row(v0), size_t(have) * t.row_nbytes());
  v.data = b.data();
  keep.push_back(std::move(b));
  return v;
}

}  // namespace

void check_tp(const ModelConfig& c, int n) {
  LL_CHECK(n >= 1 && n <= 64, "--tp must be in 1..64, got {}", n);
  if (n == 1) return;
  LL_CHECK(!c.is_moe(), "tensor parallelism does not split mixture-of-experts models yet (--tp {})", n);
  // Every rank would add it to its partial sum of the row-parallel o_proj.
  LL_CHECK(!c.o_bias, "tensor parallelism does not support an o_proj bias (attention_bias) yet (--tp {})", n);
  LL_CHECK(c.num_heads % n == 0, "--tp {}: the model's {} attention heads do not split over {} ranks", n,
           c.num_heads, n);
  LL_CHECK(c.num_kv_heads % n == 0 || n % c.num_kv_heads == 0,
           "--tp {}: the model's {} KV heads neither split over nor divide {} ranks", n, c.num_kv_heads, n);
  // Each rank's query heads must share its one KV head where KV heads are replicated.
  LL_CHECK(c.num_kv_heads >= n || (c.num_heads / n) <= (c.num_heads / c.num_kv_heads),
           "--tp {}: query heads of one rank would span several KV heads", n);
  LL_CHECK(c.intermediate_size % n == 0, "--tp {}: the MLP size {} does not split over {} ranks", n,
           c.intermediate_size, n);
}

ModelConfig shard_config(const ModelConfig& c, TpShard s) {
  if (!s.active()) return c;
  ModelConfig l = c;
  l.num_heads = c.num_heads / s.size;
  l.num_kv_heads = kv_heads_local(c, s.size);
  l.intermediate_size = c.intermediate_size / s.size;
  return l;
}

int64_t vocab_shard_rows(int64_t vocab, int n) { return (vocab + n - 1) / n; }
int64_t vocab_table_rows(int64_t vocab, int n) { return (vocab_shard_rows(vocab, n) + 1 + 63) / 64 * 64; }

Tensor shard_weight(const ModelConfig& c, TpShard s, WeightRole role, const Tensor& t, const std::string& name,
                    std::vector<Buffer>& keep) {
  if (!s.active()) return t;
  const int64_t D = c.head_dim;
  const int64_t hq = c.num_heads / s.size, kv = kv_heads_local(c, s.size);
  // The rank's first KV head: its own block, or the one its query heads use where replicated.
  const int64_t kv0 = c.num_kv_heads >= s.size ? s.rank * kv : (s.rank * hq) / (c.num_heads / c.num_kv_heads);
  const int64_t f = c.intermediate_size / s.size;
  switch (role) {
    case WeightRole::Q:
    case WeightRole::QBias: return take_rows(t, s.rank * hq * D, hq * D);
    case WeightRole::K:
    case WeightRole::V:
    case WeightRole::KBias:
    case WeightRole::VBias: return take_rows(t, kv0 * D, kv * D);
    case WeightRole::O: return take_cols(t, s.rank * hq * D, hq * D, name, keep);
    case WeightRole::Gate:
    case WeightRole::Up: return take_rows(t, s.rank * f, f);
    case WeightRole::Down: return take_cols(t, s.rank * f, f, name, keep);
    case WeightRole::Embed:
    case WeightRole::LmHead: {
      const int64_t rows = vocab_shard_rows(c.vocab_size, s.size);
      return take_vocab(t, s.rank * rows, rows, vocab_table_rows(c.vocab_size, s.size), keep);
    }
    default: return t;  // norms are replicated
  }
}

}  // namespace lite_llama

// CUDA write_slot_table, gather_rows, embedding, swiglu and argmax against the CPU backend.
#include <limits>

#include "kernels/cuda_test_util.h"

using namespace lite_llama;
using namespace lite_llama::kt;

namespace {
class CudaMisc : public CudaVsCpu {};
}  // namespace

TEST_P(CudaMisc, WriteSlotTable) {
  // Integer scatter: must match the CPU exactly, and leave every other entry alone.
  std::mt19937 rng(301);
  for (int n : {1, 5, 255, 256, 257, 3000}) {
    SCOPED_TRACE(::testing::Message() << "n " << n);
    const int rows = 17, stride = 512;
    // Distinct (request, position) pairs: two writes to one entry would race.
    const std::vector<int32_t> cells = distinct(rng, rows * stride, n);
    std::vector<int32_t> req, pos, slots;
    std::uniform_int_distribution<int32_t> sd(0, 1 << 20);
    for (int32_t c : cells) {
      req.push_back(c / stride);
      pos.push_back(c % stride);
      slots.push_back(sd(rng));
    }
    std::vector<int32_t> table(size_t(rows * stride), -7);
    DevInts dt = dev_ints(*gpu, table), dreq = dev_ints(*gpu, req), dpos = dev_ints(*gpu, pos),
            dslots = dev_ints(*gpu, slots);
    gpu->write_slot_table(dt.ptr(), stride, dreq.ptr(), dpos.ptr(), dslots.ptr(), n);
    cpu->write_slot_table(table.data(), stride, req.data(), pos.data(), slots.data(), n);
    ASSERT_EQ(ints_to_host(*gpu, dt.ptr(), table.size()), table);
  }
  // n == 0 is a no-op.
  std::vector<int32_t> table(64, 3);
  DevInts dt = dev_ints(*gpu, table);
  gpu->write_slot_table(dt.ptr(), 8, nullptr, nullptr, nullptr, 0);
  ASSERT_EQ(ints_to_host(*gpu, dt.ptr(), table.size()), table);
}

TEST_P(CudaMisc, GatherRows) {
  // Byte copies of whole rows: exact. 16-byte vector path (row bytes % 16 == 0) and the byte
  // path (100 x 2 bytes, 7 x 4 bytes); 16-bit activations and F32 rows (logit rows).
  std::mt19937 rng(302);
  struct Shape {
    DType dt;
    int64_t rows, cols;
  };
  for (const Shape& s : {Shape{act, 40, 576}, Shape{act, 40, 100}, Shape{act, 5, 8},
                         Shape{DType::F32, 33, 1000}, Shape{DType::F32, 9, 7}}) {
    for (int n : {1, 3, 64}) {
      SCOPED_TRACE(::testing::Message() << dtype_name(s.dt) << " [" << s.rows << ", " << s.cols
                                        << "] n " << n);
      std::vector<float> x = rand_act(rng, size_t(s.rows * s.cols), act);
      std::uniform_int_distribution<int32_t> rd(0, int32_t(s.rows - 1));
      std::vector<int32_t> idx(static_cast<size_t>(n));
      for (auto& r : idx) r = rd(rng);
      idx[0] = int32_t(s.rows - 1);
      if (n > 2) idx[1] = 0, idx[2] = 0;  // repeated rows
      std::vector<float> want(size_t(n * s.cols), NAN);
      cpu->gather_rows(host_f32(x, {s.rows, s.cols}), idx.data(), n, host_f32(want, {n, s.cols}));

      DevTensor dx = dev_from(*gpu, x, s.dt, {s.rows, s.cols});
      DevTensor out = dev_alloc(*gpu, s.dt, {n, s.cols});
      poison(*gpu, out.t);
      DevInts didx = dev_ints(*gpu, idx);
      gpu->gather_rows(dx.t, didx.ptr(), n, out.t);
      ASSERT_TRUE(equal_rounded(to_host(*gpu, out.t), want, s.dt));
    }
  }
}

TEST_P(CudaMisc, EmbeddingFromPreparedTables) {
  // prepare_weight turns an F32 / BF16 / F16 host table into act rows (round to nearest even
  // once); the lookup then copies rows, so every output must equal the CPU's value rounded to
  // act, bit for bit. Q8_0 / Q4_1 tables stay quantised (GQ, dequantised per lookup through an
  // fp16 FMA): within the 16-bit bound instead.
  std::mt19937 rng(303);
  const int64_t vocab = 1000;
  for (DType t : {DType::F32, DType::BF16, DType::F16, DType::Q8_0, DType::Q4_1})
    for (int64_t dim : {576, 2048, 64, 100}) {
      if (is_quantized(t) && dim % kQK != 0) continue;
      SCOPED_TRACE(::testing::Message() << dtype_name(t) << " dim " << dim);
      std::vector<float> vals = randn(rng, size_t(vocab * dim), 0.7f);
      const size_t rb = row_bytes(t, dim);
      std::vector<uint8_t> bytes(rb * size_t(vocab));
      for (int64_t r = 0; r < vocab; ++r)
        quantize_row(t, vals.data() + r * dim, bytes.data() + size_t(r) * rb, dim);
      Tensor host(bytes.data(), t, {vocab, dim});
      Tensor table = gpu->prepare_weight(host, keep);
      settle(*gpu);
      ASSERT_EQ(table.dtype == act, !is_quantized(t)) << dtype_name(table.dtype);
      for (int n : {1, 7, 64, 300}) {
        std::uniform_int_distribution<int32_t> id(0, int32_t(vocab - 1));
        std::vector<int32_t> ids(static_cast<size_t>(n));
        for (auto& i : ids) i = id(rng);
        ids[0] = int32_t(vocab - 1);
        if (n > 3) ids[1] = 0, ids[2] = ids[3];
        std::vector<float> want(size_t(n * dim), NAN);
        cpu->embedding(host, ids.data(), n, host_f32(want, {n, dim}));
        DevInts dids = dev_ints(*gpu, ids);
        // Into a 16-bit buffer and into the fp32 residual stream.
        for (DType out_t : {act, DType::F32}) {
          SCOPED_TRACE(dtype_name(out_t));
          DevTensor out = dev_alloc(*gpu, out_t, {n, dim});
          poison(*gpu, out.t);
          gpu->embedding(table, dids.ptr(), n, out.t);
          if (is_quantized(t))  // dequantised in fp32 on both sides: only the output rounds
            ASSERT_TRUE(close_rows(to_host(*gpu, out.t), want, size_t(dim),
                                   out_t == DType::F32 ? f32_tol() : act_tol(act))) << "n " << n;
          else  // the table itself is 16-bit: the fp32 output is its value exactly
            ASSERT_TRUE(equal_rounded(to_host(*gpu, out.t), want, act)) << "n " << n;
        }
      }
      keep.clear();
    }
}

TEST_P(CudaMisc, Swiglu) {
  // silu(g) * u in fp32 on both sides (the device's __expf is within a few fp32 ulps for these
  // arguments), one output rounding on the device: act_tol per token row.
  std::mt19937 rng(304);
  for (int64_t F : {1536, 8192, 100, 8})
    for (int64_t T : {1, 3, 17}) {
      SCOPED_TRACE(::testing::Message() << "F " << F << " T " << T);
      std::vector<float> gu = rand_act(rng, size_t(T * 2 * F), act, 3.0f);
      std::vector<float> want(size_t(T * F), NAN);
      cpu->swiglu(host_f32(gu, {T, 2 * F}), host_f32(want, {T, F}));
      DevTensor dgu = dev_from(*gpu, gu, act, {T, 2 * F});
      DevTensor out = dev_alloc(*gpu, act, {T, F});
      poison(*gpu, out.t);
      gpu->swiglu(dgu.t, out.t);
      ASSERT_TRUE(close_rows(to_host(*gpu, out.t), want, size_t(F), act_tol(act), "token"));
    }
}

namespace {

// Runs both argmaxes; returns the device result after checking it against the CPU's.
std::vector<int32_t> run_argmax(ops::Backend& gpu, ops::Backend& cpu, std::vector<float>& l,
                                int rows, int64_t V, int limit) {
  std::vector<int32_t> want(static_cast<size_t>(rows), -5);
  cpu.argmax(host_f32(l, {rows, V}), rows, limit, want.data());
  DevTensor dl = dev_from(gpu, l, DType::F32, {rows, V});
  DevInts out = dev_ints(gpu, std::vector<int32_t>(static_cast<size_t>(rows), -5));
  gpu.argmax(dl.t, rows, limit, out.ptr());
  std::vector<int32_t> got = ints_to_host(gpu, out.ptr(), size_t(rows));
  EXPECT_EQ(got, want) << "V " << V << " limit " << limit;
  return got;
}

}  // namespace

TEST_P(CudaMisc, ArgmaxTiesAndLimit) {
  std::mt19937 rng(305);
  const float inf = std::numeric_limits<float>::infinity();
  for (int64_t V : {1000, 1001, 32000, 151936})  // 1001: rows not 16-byte aligned (scalar loads)
    for (int rows : {1, 4, 33})
      for (int limit : {int(V), int(V) - 37}) {
        SCOPED_TRACE(::testing::Message() << "V " << V << " rows " << rows << " limit " << limit);
        std::vector<float> l = randn(rng, size_t(rows * V));
        std::vector<int32_t> expect(static_cast<size_t>(rows), -1);
        std::uniform_int_distribution<int> col(0, limit - 1);
        for (int r = 0; r < rows; ++r) {
          float* row = l.data() + size_t(r) * size_t(V);
          // Beyond the limit (ignored): a larger value than anything inside it.
          for (int64_t c = limit; c < V; ++c) row[c] = 1000.0f;
          switch (r % 5) {
            case 0: {  // tie between several columns: the lowest index wins
              int a = col(rng), b = col(rng), c = col(rng);
              row[a] = row[b] = row[c] = 50.0f;
              expect[size_t(r)] = std::min({a, b, c});
              break;
            }
            case 1:  // the last column inside the limit
              row[limit - 1] = 60.0f;
              expect[size_t(r)] = limit - 1;
              break;
            case 2:  // all equal: column 0
              std::fill(row, row + limit, 0.25f);
              expect[size_t(r)] = 0;
              break;
            case 3: {  // -inf everywhere but one column
              std::fill(row, row + limit, -inf);
              int a = col(rng);
              row[a] = -3.0f;
              expect[size_t(r)] = a;
              break;
            }
            default: {  // plain random row: the first maximum
              expect[size_t(r)] = int(std::max_element(row, row + limit) - row);
            }
          }
        }
        std::vector<int32_t> got = run_argmax(*gpu, *cpu, l, rows, V, limit);
        ASSERT_EQ(got, expect);
      }
}

LL_INSTANTIATE_DTYPES(CudaMisc);

// Tensor parallelism's collectives on CUDA (needs 2+ GPUs; skips visibly otherwise): the
// all-reduce of every rank's buffer (the one-shot peer kernel for messages up to
// CudaTuning::peer_all_reduce_max_kib, NCCL above it and with the kernel off) against the host
// sum of the same values, on every rank, for several calls in a row (the peer kernel alternates
// staging buffers and must not let a fast rank overwrite what a slow one reads); and the
// vocab-parallel logits gather.
#include <cuda_runtime.h>

#include <barrier>
#include <thread>

#include "kernels/cuda_test_util.h"

using namespace lite_llama;
using namespace lite_llama::kt;

namespace {

int gpus() {
  int n = 0;
  if (!cuda_available() || cudaGetDeviceCount(&n) != cudaSuccess) return 0;
  return n;
}

#define LL_REQUIRE_GPUS(n)                                                                  \
  do {                                                                                      \
    if (gpus() < (n)) GTEST_SKIP() << "needs " << (n) << " CUDA devices, " << gpus() << " present"; \
  } while (0)

// Runs fn(rank, backend) on a thread per rank, as the engine's RankGroup does.
void on_ranks(std::vector<std::unique_ptr<ops::Backend>>& be, const std::function<void(int, ops::Backend&)>& fn) {
  std::vector<std::thread> t;
  for (size_t r = 0; r < be.size(); ++r)
    t.emplace_back([&, r] {
      be[r]->bind_thread();
      fn(int(r), *be[r]);
    });
  for (auto& x : t) x.join();
}

void check_all_reduce(int n, int peer_kib) {
  BackendOptions o = gpu_options("bf16");
  o.cuda.peer_all_reduce_max_kib = peer_kib;
  auto be = make_backends(o, n);
  ASSERT_EQ(int(be.size()), n);
  // 16 KiB (one decode token of an 4096-wide fp32 residual), 1 MiB (64 tokens), 12 MiB (past the
  // peer kernel: NCCL), odd counts of whole 16-byte units.
  const std::vector<int64_t> sizes = {4096, 262144, 3 * 1048576, 8 * 37};
  for (DType dt : {DType::F32, DType::BF16}) {
    for (int64_t count : sizes) {
      const size_t es = dtype_info(dt).block_bytes;
      std::vector<std::vector<float>> in(static_cast<size_t>(n));
      for (int r = 0; r < n; ++r) {
        std::mt19937 rng(uint32_t(1000 * r + count));
        in[size_t(r)] = randn(rng, size_t(count), 1.0f);
        if (dt == DType::BF16)
          for (float& v : in[size_t(r)]) v = bf16_to_f32(f32_to_bf16(v));
      }
      std::vector<float> want(static_cast<size_t>(count), 0.f);
      for (int r = 0; r < n; ++r)
        for (int64_t i = 0; i < count; ++i) want[size_t(i)] += in[size_t(r)][size_t(i)];
      std::vector<std::vector<float>> got(static_cast<size_t>(n));
      std::barrier sync(n);
      on_ranks(be, [&](int r, ops::Backend& b) {
        Buffer d = b.alloc(size_t(count) * es);
        for (int call = 0; call < 3; ++call) {
          std::vector<uint16_t> h16;
          const void* src = in[size_t(r)].data();
          if (dt == DType::BF16) {
            for (float v : in[size_t(r)]) h16.push_back(f32_to_bf16(v));
            src = h16.data();
          }
          b.copy_to_device(d.data(), src, size_t(count) * es);
          b.all_reduce(Tensor(d.data(), dt, {count}, Device::CUDA));
          std::vector<float> out(static_cast<size_t>(count));
          if (dt == DType::F32) {
            b.copy_to_host(out.data(), d.data(), out.size() * 4);
          } else {
            std::vector<uint16_t> o16(static_cast<size_t>(count));
            b.copy_to_host(o16.data(), d.data(), o16.size() * 2);
            for (size_t i = 0; i < o16.size(); ++i) out[i] = bf16_to_f32(o16[i]);
          }
          if (call == 2) got[size_t(r)] = std::move(out);
          sync.arrive_and_wait();  // the next call's input copy must not overtake a peer's read
        }
      });
      const double tol = dt == DType::F32 ? 1e-5 : 2e-2;
      for (int r = 0; r < n; ++r) {
        double err = 0;
        for (int64_t i = 0; i < count; ++i)
          err = std::max(err, std::fabs(double(got[size_t(r)][size_t(i)]) - want[size_t(i)]) /
                                  (1.0 + std::fabs(double(want[size_t(i)]))));
        EXPECT_LE(err, tol) << n << " ranks, rank " << r << ", " << count << " x " << dtype_name(dt);
        EXPECT_EQ(got[size_t(r)], got[0]) << "ranks must hold the same bits (rank " << r << ")";
      }
    }
  }
}

TEST(CudaTensorParallel, AllReducePeerKernelAndNccl) {
  LL_REQUIRE_GPUS(2);
  for (int n : {2, std::min(gpus(), 8)}) {
    check_all_reduce(n, 4096);
    check_all_reduce(n, 0);  // NCCL for every size
  }
}

// The fused all-reduce + residual add + RMSNorm (the peer kernel's low-latency or staged channel,
// or NCCL and the separate norm with the kernel off), three calls in a row on new partial sums
// (a call that read the previous call's data would be off), each after a plain all-reduce, as a
// forward interleaves them. batch_poll: CudaTuning::peer_ll_batch_poll (the low-latency channel's
// polling of a thread's lines all at once or one by one).
void check_all_reduce_norm(int n, int peer_kib, bool batch_poll = true) {
  BackendOptions o = gpu_options("bf16");
  o.cuda.peer_all_reduce_max_kib = peer_kib;
  o.cuda.peer_ll_batch_poll = batch_poll;
  auto be = make_backends(o, n);
  constexpr int kCalls = 3;
  // 64 x 4096 fills the low-latency channel (1 MiB); 300 x 1024 and 80 x 4096 take the staged one.
  for (auto [rows, H] : std::vector<std::pair<int64_t, int64_t>>{
           {1, 4096}, {5, 2048}, {64, 4096}, {1, 8192}, {300, 1024}, {80, 4096}}) {
    std::mt19937 rng(uint32_t(rows * 7 + H));
    const std::vector<float> res0 = randn(rng, size_t(rows * H), 2.0f), w = randn(rng, size_t(H), 1.0f);
    std::vector<std::vector<std::vector<float>>> x(kCalls, std::vector<std::vector<float>>(static_cast<size_t>(n)));
    for (auto& call : x)
      for (auto& v : call) v = randn(rng, size_t(rows * H), 1.0f);
    std::vector<float> res = res0, want(res.size());
    for (int k = 0; k < kCalls; ++k)
      for (int64_t i = 0; i < rows * H; ++i) {
        float sum = 0;
        for (int r = 0; r < n; ++r) sum += x[size_t(k)][size_t(r)][size_t(i)];
        res[size_t(i)] += sum;
      }
    for (int64_t t = 0; t < rows; ++t) {
      double ss = 0;
      for (int64_t j = 0; j < H; ++j) ss += double(res[size_t(t * H + j)]) * res[size_t(t * H + j)];
      const double inv = 1.0 / std::sqrt(ss / double(H) + 1e-5);
      for (int64_t j = 0; j < H; ++j) want[size_t(t * H + j)] = float(res[size_t(t * H + j)] * inv * w[size_t(j)]);
    }
    std::vector<std::vector<float>> got_res(static_cast<size_t>(n)), got_out(static_cast<size_t>(n));
    on_ranks(be, [&](int r, ops::Backend& b) {
      std::vector<Buffer> keep;
      Buffer dr = b.alloc(size_t(rows * H) * 4), dout = b.alloc(size_t(rows * H) * 2);
      Buffer dw = b.alloc(size_t(H) * 4), dy = b.alloc(64);
      std::vector<Buffer> dx;
      for (int k = 0; k < kCalls; ++k) {
        dx.push_back(b.alloc(size_t(rows * H) * 4));
        b.copy_to_device(dx.back().data(), x[size_t(k)][size_t(r)].data(), size_t(rows * H) * 4);
      }
      b.copy_to_device(dr.data(), res0.data(), size_t(rows * H) * 4);
      b.copy_to_device(dw.data(), w.data(), size_t(H) * 4);
      for (int k = 0; k < kCalls; ++k) {
        b.all_reduce(Tensor(dy.data(), DType::F32, {16}, Device::CUDA));  // the other channel in between
        b.all_reduce_add_rms_norm(Tensor(dr.data(), DType::F32, {rows, H}, Device::CUDA),
                                  Tensor(dx[size_t(k)].data(), DType::F32, {rows, H}, Device::CUDA),
                                  Tensor(dw.data(), DType::F32, {H}, Device::CUDA), 1e-5f,
                                  Tensor(dout.data(), DType::BF16, {rows, H}, Device::CUDA));
      }
      got_res[size_t(r)].resize(size_t(rows * H));
      b.copy_to_host(got_res[size_t(r)].data(), dr.data(), size_t(rows * H) * 4);
      std::vector<uint16_t> o16(static_cast<size_t>(rows * H));
      b.copy_to_host(o16.data(), dout.data(), o16.size() * 2);
      for (uint16_t h : o16) got_out[size_t(r)].push_back(bf16_to_f32(h));
    });
    for (int r = 0; r < n; ++r) {
      double er = 0, eo = 0;
      for (size_t i = 0; i < res.size(); ++i) {
        er = std::max(er, std::fabs(double(got_res[size_t(r)][i]) - res[i]) / (1 + std::fabs(res[i])));
        eo = std::max(eo, std::fabs(double(got_out[size_t(r)][i]) - want[i]) / (1 + std::fabs(want[i])));
      }
      SCOPED_TRACE(::testing::Message() << "peer KiB " << peer_kib << ", batch poll " << batch_poll);
      EXPECT_LE(er, 1e-5) << n << " ranks, " << rows << " x " << H << ", rank " << r << " (residual)";
      EXPECT_LE(eo, 1e-2) << n << " ranks, " << rows << " x " << H << ", rank " << r << " (normalised)";
      EXPECT_EQ(got_out[size_t(r)], got_out[0]) << "ranks must hold the same bits";
      EXPECT_EQ(got_res[size_t(r)], got_res[0]) << "ranks must hold the same bits";
    }
  }
}

TEST(CudaTensorParallel, AllReduceAddRmsNorm) {
  LL_REQUIRE_GPUS(2);
  for (int n : {2, std::min(gpus(), 8)}) {
    check_all_reduce_norm(n, 4096, true);
    check_all_reduce_norm(n, 4096, false);
    check_all_reduce_norm(n, 0);
  }
}

TEST(CudaTensorParallel, AllGatherColumns) {
  LL_REQUIRE_GPUS(2);
  const int n = std::min(gpus(), 4);
  auto be = make_backends(gpu_options("bf16"), n);
  const int64_t rows = 5, cols = 37, ld = 64, V = cols * n - 3;  // the last rank's tail is cut
  std::vector<std::vector<float>> got(static_cast<size_t>(n));
  on_ranks(be, [&](int r, ops::Backend& b) {
    std::vector<float> local(size_t(rows * ld));
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < ld; ++j) local[size_t(i * ld + j)] = float(r * 100000 + i * 1000 + j);
    Buffer dl = b.alloc(local.size() * 4), dout = b.alloc(size_t(rows * V) * 4);
    Tensor lt(dl.data(), DType::F32, {rows, ld}, Device::CUDA);
    Buffer ws = b.alloc(b.all_gather_workspace_bytes(lt));
    b.copy_to_device(dl.data(), local.data(), local.size() * 4);
    b.all_gather_cols(lt, cols, Tensor(dout.data(), DType::F32, {rows, V}, Device::CUDA), ws.data());
    got[size_t(r)].resize(size_t(rows * V));
    b.copy_to_host(got[size_t(r)].data(), dout.data(), got[size_t(r)].size() * 4);
  });
  for (int r = 0; r < n; ++r)
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t c = 0; c < V; ++c)
        ASSERT_EQ(got[size_t(r)][size_t(i * V + c)], float((c / cols) * 100000 + i * 1000 + c % cols))
            << "rank " << r << " row " << i << " col " << c;
}

}  // namespace

// CUDA graphs: what a captured function enqueues is recorded once and replayed with new data in
// the same buffers. The replay must equal a fresh eager run on that data (bit for bit: the same
// kernels with the same launch shapes and cuBLASLt plan) and the CPU reference.
#include "kernels/attention_harness.h"

using namespace lite_llama;
using namespace lite_llama::kt;

namespace {

class CudaGraphs : public CudaVsCpu {
 protected:
  void norm_and_linear_replay(const char* pdl);
};

// A [N, K] projection with a bias, prepared on both backends from BF16 host bytes.
struct Proj {
  std::vector<uint16_t> w;
  std::vector<float> bias;
  ops::Linear cpu_lin, gpu_lin;
};

void make_proj(Proj& p, ops::Backend& gpu, ops::Backend& cpu, std::vector<Buffer>& keep,
               std::mt19937& rng, int64_t K, int64_t N, DType act, bool with_bias = true) {
  const std::vector<float> v = randn(rng, size_t(N * K), 1.0f / std::sqrt(float(K)));
  p.w.resize(v.size());
  for (size_t i = 0; i < v.size(); ++i) p.w[i] = f32_to_bf16(v[i]);
  p.bias = rand_act(rng, size_t(N), act, 0.5f);
  ops::Linear host;
  host.in_features = K;
  host.out_features = N;
  host.parts = {Tensor(p.w.data(), DType::BF16, {N, K})};
  if (with_bias) host.bias = Tensor(p.bias.data(), DType::F32, {N});
  p.cpu_lin = cpu.prepare_linear(host, keep);
  if (with_bias) {
    host.bias = upload_f32(gpu, p.bias, {N}, keep);
    settle(gpu);
  }
  p.gpu_lin = gpu.prepare_linear(host, keep);
  settle(gpu);
}

}  // namespace

TEST_P(CudaGraphs, NormAndLinearReplayWithNewInputs) {
  ASSERT_TRUE(gpu->supports_graphs());
  // Also with CudaTuning::pdl_gemv: the 1-token GEMV then starts while the norm before it runs
  // and must still read the norm's finished output.
  for (const char* pdl : {"0", "1"}) {
    CudaTuning t;
    t.pdl_gemv = pdl[0] == '1';
    std::unique_ptr<ops::Backend> g = make_gpu(GetParam(), t);
    std::swap(gpu, g);
    norm_and_linear_replay(pdl);
    std::swap(gpu, g);
    if (HasFatalFailure()) return;
  }
}

void CudaGraphs::norm_and_linear_replay(const char* pdl) {
  std::mt19937 rng(501);
  const int64_t K = 576, N = 1000;
  const float eps = 1e-5f;
  for (int64_t T : {1, 4, 32}) {  // GEMV (1 token), cuBLASLt
    SCOPED_TRACE(::testing::Message() << "T " << T << " LITE_LLAMA_PDL_GEMV=" << pdl);
    // A projection with a bias (16-bit output) and an LM head without one (F32 logits; an F32
    // output with a bias on the cuBLASLt path is CudaLinear.F32LogitsWithBias's concern).
    Proj p, head;
    make_proj(p, *gpu, *cpu, keep, rng, K, N, act);
    make_proj(head, *gpu, *cpu, keep, rng, K, N, act, false);
    std::vector<float> w = randn(rng, size_t(K));
    Tensor dw = upload_f32(*gpu, w, {K}, keep);
    settle(*gpu);
    if (HasFatalFailure()) return;
    DevTensor x = dev_alloc(*gpu, act, {T, K}), h = dev_alloc(*gpu, act, {T, K});
    DevTensor y = dev_alloc(*gpu, act, {T, N}), logits = dev_alloc(*gpu, DType::F32, {T, N});
    DevTensor h2 = dev_alloc(*gpu, act, {T, K}), y2 = dev_alloc(*gpu, act, {T, N});
    DevTensor logits2 = dev_alloc(*gpu, DType::F32, {T, N});
    poison(*gpu, y.t);
    const int id = gpu->capture_graph([&] {
      gpu->rms_norm(x.t, dw, eps, h.t);
      gpu->linear(h.t, p.gpu_lin, y.t);
      gpu->linear(h.t, head.gpu_lin, logits.t);
    });
    ASSERT_GE(id, 0);
    // Capturing records the work without running it.
    const std::vector<float> after_capture = to_host(*gpu, y.t);
    ASSERT_TRUE(std::all_of(after_capture.begin(), after_capture.end(),
                            [](float v) { return std::isnan(v); }))
        << "capture_graph executed the captured work";

    for (int rep = 0; rep < 3; ++rep) {
      SCOPED_TRACE(::testing::Message() << "replay " << rep);
      const std::vector<float> xv = rand_act(rng, size_t(T * K), act, 1.0f + float(rep));
      const std::vector<uint8_t> xb = encode(xv, act);
      gpu->copy_to_device(x.t.data, xb.data(), xb.size());
      poison(*gpu, h.t);
      poison(*gpu, y.t);
      poison(*gpu, logits.t);
      gpu->replay_graph(id);
      const std::vector<float> gh = to_host(*gpu, h.t), gy = to_host(*gpu, y.t),
                               gl = to_host(*gpu, logits.t);

      // Eager run of the same ops on the same data into other buffers.
      gpu->rms_norm(x.t, dw, eps, h2.t);
      gpu->linear(h2.t, p.gpu_lin, y2.t);
      gpu->linear(h2.t, head.gpu_lin, logits2.t);
      ASSERT_EQ(to_host_bytes(*gpu, h.t), to_host_bytes(*gpu, h2.t)) << "norm: replay != eager";
      ASSERT_EQ(to_host_bytes(*gpu, y.t), to_host_bytes(*gpu, y2.t)) << "linear: replay != eager";
      ASSERT_EQ(to_host_bytes(*gpu, logits.t), to_host_bytes(*gpu, logits2.t))
          << "F32 linear: replay != eager";

      // CPU reference: the norm on x, the projections on the device's (rounded) norm output.
      std::vector<float> xc = xv, hc(size_t(T * K), NAN), yc(size_t(T * N), NAN);
      cpu->rms_norm(host_f32(xc, {T, K}), host_f32(w, {K}), eps, host_f32(hc, {T, K}));
      ASSERT_TRUE(close_rows(gh, hc, size_t(K), act_tol(act), "token")) << "rms_norm";
      std::vector<float> hg = gh, lc(size_t(T * N), NAN);
      cpu->linear(host_f32(hg, {T, K}), p.cpu_lin, host_f32(yc, {T, N}));
      cpu->linear(host_f32(hg, {T, K}), head.cpu_lin, host_f32(lc, {T, N}));
      ASSERT_TRUE(close_rows(gy, yc, size_t(N), act_tol(act), "token")) << "linear";
      ASSERT_TRUE(close_rows(gl, lc, size_t(N), f32_tol(), "token")) << "F32 linear";
    }
    keep.clear();
  }
}

TEST_P(CudaGraphs, DecodeAttentionOneGraphForEveryLength) {
  // One graph captured with a large max_seq_len bound serves every sequence length: the
  // lengths are read from device memory at replay. The slot table holds the longest lengths;
  // shorter ones use a prefix of each request's row.
  std::mt19937 rng(502);
  for (int d : {64, 128})
    for (const auto& h : {std::pair{8, 2}, std::pair{32, 8}, std::pair{9, 3}}) {
      SCOPED_TRACE(::testing::Message() << "Hq " << h.first << " Hkv " << h.second << " D " << d);
      const std::vector<SeqSpec> longest = {{1, 3000}, {1, 1500}, {1, 70}, {1, 5}, {1, 4096}};
      AttnProblem P = make_attn_problem(rng, longest, 5, h.first, h.second, d, act);
      GpuAttn g;
      g.upload(*gpu, P, act);
      g.meta.max_seq_len = 8192;  // the capture-time bound (the model's context)
      const int id = gpu->capture_graph([&] { g.enqueue(*gpu, P); });
      ASSERT_GE(id, 0);
      const std::vector<std::vector<int32_t>> length_sets = {
          {3000, 1500, 70, 5, 4096}, {1, 2, 3, 4, 5}, {65, 1499, 64, 1, 129}, {3000, 1, 70, 5, 1000}};
      for (const auto& lens : length_sets) {
        for (size_t b = 0; b < lens.size(); ++b) ASSERT_LE(lens[b], longest[b].seq_len);
        SCOPED_TRACE(::testing::Message() << "lengths " << lens[0] << " " << lens[1] << " "
                                          << lens[2] << " " << lens[3] << " " << lens[4]);
        P.b_seq_len = lens;
        gpu->copy_to_device(g.seq_len.ptr(), lens.data(), lens.size() * 4);
        poison(*gpu, g.out.t);
        gpu->replay_graph(id);
        const std::vector<float> got = to_host(*gpu, g.out.t);
        const std::vector<float> want = cpu_attention(*cpu, P);
        ASSERT_TRUE(check_attn(got, want, P, act, AttnFill::Random));
      }
    }
}

TEST_P(CudaGraphs, SeveralGraphsReplayIndependently) {
  // Graph ids index separate executables (one per batch-size bucket in the engine).
  std::mt19937 rng(503);
  const int64_t K = 256, N = 64;
  Proj p;
  make_proj(p, *gpu, *cpu, keep, rng, K, N, act);
  if (HasFatalFailure()) return;
  std::vector<DevTensor> xs, ys;
  std::vector<int> ids;
  const int64_t Ts[] = {1, 2, 8, 16};
  for (int64_t T : Ts) {
    xs.push_back(dev_alloc(*gpu, act, {T, K}));
    ys.push_back(dev_alloc(*gpu, act, {T, N}));
    const size_t i = xs.size() - 1;
    ids.push_back(gpu->capture_graph([&, i] { gpu->linear(xs[i].t, p.gpu_lin, ys[i].t); }));
  }
  for (int rep = 0; rep < 2; ++rep)
    for (size_t i = 0; i < ids.size(); ++i) {
      const int64_t T = Ts[i];
      SCOPED_TRACE(::testing::Message() << "graph " << ids[i] << " T " << T << " rep " << rep);
      std::vector<float> xv = rand_act(rng, size_t(T * K), act);
      const std::vector<uint8_t> xb = encode(xv, act);
      gpu->copy_to_device(xs[i].t.data, xb.data(), xb.size());
      poison(*gpu, ys[i].t);
      gpu->replay_graph(ids[i]);
      std::vector<float> want(size_t(T * N), NAN);
      cpu->linear(host_f32(xv, {T, K}), p.cpu_lin, host_f32(want, {T, N}));
      ASSERT_TRUE(close_rows(to_host(*gpu, ys[i].t), want, size_t(N), act_tol(act), "token"));
    }
}

LL_INSTANTIATE_DTYPES(CudaGraphs);

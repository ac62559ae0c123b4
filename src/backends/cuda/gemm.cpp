#include "backends/cuda/gemm.h"

#include <algorithm>

#include "backends/cuda/cuda_check.h"

namespace lite_llama::cuda {
namespace {

// Token counts that share a heuristic query: exact up to 16 (decode batches, where the choice
// matters most), then multiples of 32 up to 1,024 and of 256 above, so the algorithm used was
// chosen for a count at most 32 (256) larger.
int bucket_tokens(int T) {
  if (T <= 16) return T;
  if (T <= 1024) return (T + 31) / 32 * 32;
  return (T + 255) / 256 * 256;
}

// Gemm::tune: the heuristic's candidates timed, the replays timed a candidate, the smallest gain
// over the first that picks another (below it, timing noise could flip the choice), and the
// extent of a timed pass.
constexpr int kTuneCandidates = 8;
constexpr int kTuneReps = 3;
constexpr double kTuneMinGain = 0.03;
constexpr size_t kTunePassBytes = size_t(256) << 20;
constexpr int kTunePassCalls = 64;

}  // namespace

Gemm::Gemm(size_t workspace_bytes) : workspace_bytes_(workspace_bytes) {
  LL_CUBLAS(cublasLtCreate(&handle_));
  LL_CUDA(cudaMalloc(&workspace_, workspace_bytes_));
}

Gemm::~Gemm() {
  for (auto& [k, p] : plans_) {
    cublasLtMatrixLayoutDestroy(p.a);
    cublasLtMatrixLayoutDestroy(p.b);
    cublasLtMatrixLayoutDestroy(p.c);
    cublasLtMatmulDescDestroy(p.op);
  }
  cudaFree(workspace_);
  cublasLtDestroy(handle_);
}

// Row-major out[T, N] is column-major out^T [N, T] = W (col-major [K, N], transposed) x x^T
// (col-major [K, T]): so A = W with op T, B = x with op N, m = N, n = T, k = K. This "TN" form is
// also the one cuBLASLt's FP8 kernels require.
Gemm::Plan Gemm::describe(const Key& key) {
  const auto [act_i, out_f32, bias, T, N, K, ldo, ldw] = key;
  const bool fp8 = ldw > 0;
  Plan p;
  const cudaDataType_t act = act_i == int(Act::BF16) ? CUDA_R_16BF : CUDA_R_16F;
  const cudaDataType_t in = fp8 ? CUDA_R_8F_E4M3 : act;
  const cudaDataType_t outt = out_f32 ? CUDA_R_32F : act;
  LL_CUBLAS(cublasLtMatmulDescCreate(&p.op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  LL_CUBLAS(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
  LL_CUBLAS(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
  if (bias) {
    const cublasLtEpilogue_t ep = CUBLASLT_EPILOGUE_BIAS;
    LL_CUBLAS(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &ep, sizeof(ep)));
    // Bias is stored in the activation type (the output type here).
    LL_CUBLAS(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &act, sizeof(act)));
  }
  if (fp8) {
    const int32_t mode = CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F;
    LL_CUBLAS(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &mode, sizeof(mode)));
    LL_CUBLAS(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &mode, sizeof(mode)));
    // Some cuBLASLt versions only offer scaled algorithms once the scale pointers are set: any
    // device pointer will do for the query, each call sets the real ones.
    const void* any = workspace_;
    LL_CUBLAS(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &any, sizeof(any)));
    LL_CUBLAS(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &any, sizeof(any)));
  }
  LL_CUBLAS(cublasLtMatrixLayoutCreate(&p.a, in, K, N, fp8 ? ldw : K));
  LL_CUBLAS(cublasLtMatrixLayoutCreate(&p.b, in, K, T, K));
  LL_CUBLAS(cublasLtMatrixLayoutCreate(&p.c, outt, N, T, ldo));
  return p;
}

void Gemm::destroy(Plan& p) {
  cublasLtMatrixLayoutDestroy(p.a);
  cublasLtMatrixLayoutDestroy(p.b);
  cublasLtMatrixLayoutDestroy(p.c);
  cublasLtMatmulDescDestroy(p.op);
}

Gemm::Plan* Gemm::plan(const Key& key) {
  if (auto it = plans_.find(key); it != plans_.end()) return &it->second;
  if (unsupported_.count(key)) return nullptr;
  Plan p = describe(key);
  Key bucket = key;
  std::get<3>(bucket) = bucket_tokens(std::get<3>(key));
  const cublasLtMatmulAlgo_t* algo = nullptr;
  if (bucket == key) {
    algo = heuristic(key, &p);
  } else {  // the bucket's algorithm, asked with the bucket's token count
    algo = heuristic(bucket, nullptr);
    cublasLtMatmulHeuristicResult_t check{};
    if (algo && cublasLtMatmulAlgoCheck(handle_, p.op, p.a, p.b, p.c, p.c, algo, &check) != CUBLAS_STATUS_SUCCESS)
      algo = heuristic(key, &p);  // the bucket's algorithm does not fit this exact shape
  }
  if (!algo) {
    destroy(p);
    unsupported_[key] = true;
    return nullptr;
  }
  p.algo = *algo;
  return &plans_.emplace(key, p).first->second;
}

std::vector<cublasLtMatmulHeuristicResult_t> Gemm::candidates(const Plan& p, int n) {
  cublasLtMatmulPreference_t pref;
  LL_CUBLAS(cublasLtMatmulPreferenceCreate(&pref));
  LL_CUBLAS(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                 &workspace_bytes_, sizeof(workspace_bytes_)));
  std::vector<cublasLtMatmulHeuristicResult_t> res(static_cast<size_t>(n));
  int found = 0;
  const cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(handle_, p.op, p.a, p.b, p.c, p.c, pref, n, res.data(), &found);
  cublasLtMatmulPreferenceDestroy(pref);
  res.resize(st == CUBLAS_STATUS_SUCCESS ? size_t(found) : 0);
  std::erase_if(res, [](const cublasLtMatmulHeuristicResult_t& r) { return r.state != CUBLAS_STATUS_SUCCESS; });
  return res;
}

const cublasLtMatmulAlgo_t* Gemm::heuristic(const Key& key, const Plan* p) {
  if (auto it = algos_.find(key); it != algos_.end()) return &it->second;
  if (no_algo_.count(key)) return nullptr;
  Plan own;
  if (!p) own = describe(key);
  const auto res = candidates(p ? *p : own, 1);
  if (!p) destroy(own);
  if (res.empty()) {
    no_algo_[key] = true;
    return nullptr;
  }
  return &algos_.emplace(key, res[0].algo).first->second;
}

GemmTuneResult Gemm::tune(Act act, bool out_f32, const void* bias, int T, int N, int K,
                          const std::vector<const void*>& weights, cudaStream_t s) {
  GemmTuneResult r;
  const Key key{int(act), out_f32, bias != nullptr, bucket_tokens(T), N, K, N, 0};
  cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
  LL_CUDA(cudaStreamIsCapturing(s, &capturing));
  if (weights.empty() || capturing != cudaStreamCaptureStatusNone || algos_.count(key) || no_algo_.count(key))
    return r;
  for (const auto& [k, p] : plans_) {
    Key b = k;
    std::get<3>(b) = bucket_tokens(std::get<3>(k));
    if (b == key) return r;  // a plan of this bucket is in use already: keep its algorithm
  }
  const int Tb = std::get<3>(key);
  Plan p = describe(key);
  const auto cand = candidates(p, kTuneCandidates);
  r.candidates = int(cand.size());
  if (cand.empty()) {
    destroy(p);
    no_algo_[key] = true;
    return r;
  }
  // One pass: the weights in turn, repeated up to kTunePassBytes (or kTunePassCalls calls), so that
  // small matrices are read from memory, as in a step, not from the L2.
  const size_t w_bytes = size_t(N) * size_t(K) * 2;
  int calls = int(weights.size());
  while (size_t(calls) * w_bytes < kTunePassBytes && calls < kTunePassCalls) calls += int(weights.size());
  void* x = nullptr;
  void* out = nullptr;
  LL_CUDA(cudaMalloc(&x, size_t(Tb) * size_t(K) * 2));
  LL_CUDA(cudaMalloc(&out, size_t(Tb) * size_t(N) * (out_f32 ? 4 : 2)));
  LL_CUDA(cudaMemsetAsync(x, 0, size_t(Tb) * size_t(K) * 2, s));
  if (bias) LL_CUBLAS(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)));
  cudaEvent_t e0, e1;
  LL_CUDA(cudaEventCreate(&e0));
  LL_CUDA(cudaEventCreate(&e1));
  std::vector<double> us(cand.size(), 0.0);
  const float alpha = 1.f, beta = 0.f;
  for (size_t i = 0; i < cand.size(); ++i) {
    // The pass as a CUDA graph, as a step replays it: no host launch gaps in the time.
    cudaGraph_t g = nullptr;
    cudaGraphExec_t exec = nullptr;
    LL_CUDA(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    bool ok = true;
    for (int c = 0; c < calls && ok; ++c)
      ok = cublasLtMatmul(handle_, p.op, &alpha, weights[size_t(c) % weights.size()], p.a, x, p.b, &beta, out, p.c,
                          out, p.c, &cand[i].algo, workspace_, workspace_bytes_, s) == CUBLAS_STATUS_SUCCESS;
    ok = cudaStreamEndCapture(s, &g) == cudaSuccess && ok && cudaGraphInstantiate(&exec, g, 0) == cudaSuccess;
    if (g) cudaGraphDestroy(g);
    if (!ok) {
      cudaGetLastError();  // a candidate that did not run here leaves no error behind
      us[i] = 1e30;  // not usable here
      continue;
    }
    std::vector<float> ms;
    for (int rep = 0; rep < 1 + kTuneReps; ++rep) {  // the first replay warms up
      LL_CUDA(cudaEventRecord(e0, s));
      LL_CUDA(cudaGraphLaunch(exec, s));
      LL_CUDA(cudaEventRecord(e1, s));
      LL_CUDA(cudaEventSynchronize(e1));
      float t = 0;
      LL_CUDA(cudaEventElapsedTime(&t, e0, e1));
      if (rep > 0) ms.push_back(t);
    }
    cudaGraphExecDestroy(exec);
    std::sort(ms.begin(), ms.end());
    us[i] = 1e3 * ms[ms.size() / 2];
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  cudaFree(x);
  cudaFree(out);
  destroy(p);
  size_t best = 0;
  for (size_t i = 1; i < cand.size(); ++i)
    if (us[i] < us[best]) best = i;
  if (best != 0 && us[best] > us[0] * (1.0 - kTuneMinGain)) best = 0;  // within the noise: the heuristic's
  if (us[best] >= 1e30) {  // no candidate ran: leave the bucket to the plain heuristic
    r.candidates = 0;
    return r;
  }
  algos_.emplace(key, cand[best].algo);
  r.chosen = int(best);
  r.first_us = us[0];
  r.chosen_us = us[best];
  return r;
}

void Gemm::run(Act act, const void* x, const void* w, const void* bias, void* out, bool out_f32, int T,
               int N, int K, cudaStream_t s, int ldo) {
  if (T == 0) return;
  Plan* p = plan(Key{int(act), out_f32, bias != nullptr, T, N, K, ldo ? ldo : N, 0});
  LL_CHECK(p, "cuBLASLt found no algorithm for a [{}, {}] x [{}, {}]^T product", T, K, N, K);
  matmul(*p, x, w, bias, out, s);
}

bool Gemm::run_fp8(Act act, const void* xq, const float* x_scale, const void* w, int ldw, const float* w_scale,
                   const void* bias, void* out, bool out_f32, int T, int N, int K, cudaStream_t s, int ldo) {
  if (T == 0) return true;
  Plan* p = plan(Key{int(act), out_f32, bias != nullptr, T, N, K, ldo ? ldo : N, ldw});
  if (!p) return false;
  LL_CUBLAS(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &w_scale, sizeof(w_scale)));
  LL_CUBLAS(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &x_scale, sizeof(x_scale)));
  matmul(*p, xq, w, bias, out, s);
  return true;
}

void Gemm::matmul(Plan& p, const void* x, const void* w, const void* bias, void* out, cudaStream_t s) {
  if (bias)
    LL_CUBLAS(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)));
  const float alpha = 1.f, beta = 0.f;
  LL_CUBLAS(cublasLtMatmul(handle_, p.op, &alpha, w, p.a, x, p.b, &beta, out, p.c, out, p.c, &p.algo,
                           workspace_, workspace_bytes_, s));
}

}  // namespace lite_llama::cuda

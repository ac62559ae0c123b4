#include "backends/cpu/cpu_moe.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "backends/cpu/gemm_f32.h"
#include "core/error.h"

namespace lite_llama::cpu {

void moe_route_f32(ThreadPool& pool, const Tensor& logits, int top_k, bool norm_topk_prob,
                   int32_t* t_expert, float* t_weight) {
  const int64_t T = logits.rows();
  const int E = int(logits.cols());
  LL_CHECK(logits.dtype == DType::F32, "moe_route: router logits must be F32");
  LL_CHECK(top_k >= 1 && top_k <= E, "moe_route: top_k {} outside 1..{}", top_k, E);
  pool.parallel_for(T, [&](int64_t b, int64_t e) {
    std::vector<float> p(static_cast<size_t>(E));
    for (int64_t t = b; t < e; ++t) {
      const float* l = logits.ptr<float>() + t * E;
      float mx = l[0];
      for (int i = 1; i < E; ++i) mx = std::max(mx, l[i]);
      float sum = 0;
      for (int i = 0; i < E; ++i) sum += (p[size_t(i)] = std::exp(l[i] - mx));
      // k selection passes: the largest remaining probability, lowest index on ties.
      float kept = 0;
      for (int j = 0; j < top_k; ++j) {
        int best = -1;
        for (int i = 0; i < E; ++i)
          if (p[size_t(i)] >= 0 && (best < 0 || p[size_t(i)] > p[size_t(best)])) best = i;
        t_expert[t * top_k + j] = best;
        t_weight[t * top_k + j] = p[size_t(best)] / sum;
        kept += p[size_t(best)] / sum;
        p[size_t(best)] = -1;
      }
      if (norm_topk_prob)
        for (int j = 0; j < top_k; ++j) t_weight[t * top_k + j] /= kept;
    }
  });
}

namespace {

// Workspace layout (floats), n = tokens * top_k assignments sorted by expert: x rows [n, H],
// gate|up [n, 2F], SwiGLU [n, F], expert outputs [n, H].
struct Ws {
  float *x, *gu, *h, *y;
};

Ws carve(void* ws, int64_t n, int64_t H, int64_t F) {
  float* p = static_cast<float*>(ws);
  Ws w;
  w.x = p, p += n * H;
  w.gu = p, p += n * 2 * F;
  w.h = p, p += n * F;
  w.y = p;
  return w;
}

// One projection of one expert over its rows: out[t * ldo + r] = x[t] . w[r].
struct GemmJob {
  Tensor w;
  const float* x;
  int64_t T;
  float* out;
  int64_t ldo;
};

constexpr int64_t kRowBlock = 16;  // weight rows per work item, as the dense linear

// All jobs' weight rows in one parallel_for (work items are row blocks across every job), so a
// decode step pays one dispatch per projection instead of one per active expert.
void run_jobs(ThreadPool& pool, const Kernels& k, const std::vector<GemmJob>& jobs) {
  std::vector<int64_t> first(jobs.size() + 1, 0);  // first row block of each job
  for (size_t j = 0; j < jobs.size(); ++j)
    first[j + 1] = first[j] + (jobs[j].w.rows() + kRowBlock - 1) / kRowBlock;
  pool.parallel_for(first.back(), [&](int64_t b, int64_t e) {
    size_t j = size_t(std::upper_bound(first.begin(), first.end(), b) - first.begin()) - 1;
    for (int64_t blk = b; blk < e; ++blk) {
      while (blk >= first[j + 1]) ++j;
      const GemmJob& g = jobs[j];
      const int64_t r0 = (blk - first[j]) * kRowBlock, n = std::min(kRowBlock, g.w.rows() - r0);
      const size_t rb = g.w.row_nbytes();
      gemm_f32(k, g.w.dtype, static_cast<const uint8_t*>(g.w.data) + size_t(r0) * rb, rb, n, g.x, g.T,
               g.w.cols(), g.out + r0, g.ldo);
    }
  });
}

}  // namespace

size_t moe_workspace_f32(int max_tokens, int top_k, const ops::MoeExperts& w) {
  return size_t(max_tokens) * size_t(top_k) * size_t(2 * w.hidden + 3 * w.ffn) * sizeof(float);
}

void moe_experts_f32(ThreadPool& pool, const Kernels& k, const Tensor& x, const ops::MoeExperts& w,
                     const int32_t* t_expert, const float* t_weight, int top_k, void* workspace,
                     Tensor out, const LinearFn& linear, const SwigluFn& swiglu) {
  const int64_t T = x.rows(), H = w.hidden, F = w.ffn, n = T * top_k;
  const int E = w.num_experts;
  LL_CHECK(x.dtype == DType::F32 && out.dtype == DType::F32 && x.cols() == H && out.cols() == H,
           "moe_experts: x {} / out {} must be F32 [T, {}]", x.shape_str(), out.shape_str(), H);
  LL_CHECK(int(w.gate.size()) == E && int(w.up.size()) == E && int(w.down.size()) == E,
           "moe_experts: weights of {} experts expected per projection", E);
  // Counting sort of the assignments by expert: slot[i] is assignment i's row in the workspace.
  std::vector<int64_t> start(size_t(E) + 1, 0), slot(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    LL_CHECK(t_expert[i] >= 0 && t_expert[i] < E, "moe_experts: expert {} outside 0..{}", t_expert[i], E - 1);
    ++start[size_t(t_expert[i]) + 1];
  }
  for (int e = 0; e < E; ++e) start[size_t(e) + 1] += start[size_t(e)];
  std::vector<int64_t> fill(start.begin(), start.end() - 1);
  for (int64_t i = 0; i < n; ++i) slot[size_t(i)] = fill[size_t(t_expert[i])]++;
  const Ws ws = carve(workspace, n, H, F);
  for (int64_t i = 0; i < n; ++i)
    std::memcpy(ws.x + slot[size_t(i)] * H, x.ptr<float>() + (i / top_k) * H, size_t(H) * sizeof(float));

  if (linear) {
    // The backend's own linear per active expert (its int8-activation path).
    for (int e = 0; e < E; ++e) {
      const int64_t r0 = start[size_t(e)], c = start[size_t(e) + 1] - r0;
      if (c == 0) continue;
      ops::Linear gate_up{{w.gate[size_t(e)], w.up[size_t(e)]}, Tensor(), H, 2 * F};
      ops::Linear down{{w.down[size_t(e)]}, Tensor(), F, H};
      linear(Tensor(ws.x + r0 * H, DType::F32, {c, H}), gate_up, Tensor(ws.gu + r0 * 2 * F, DType::F32, {c, 2 * F}));
      swiglu(Tensor(ws.gu + r0 * 2 * F, DType::F32, {c, 2 * F}), Tensor(ws.h + r0 * F, DType::F32, {c, F}));
      linear(Tensor(ws.h + r0 * F, DType::F32, {c, F}), down, Tensor(ws.y + r0 * H, DType::F32, {c, H}));
    }
  } else {
    std::vector<GemmJob> up, down;
    for (int e = 0; e < E; ++e) {
      const int64_t r0 = start[size_t(e)], c = start[size_t(e) + 1] - r0;
      if (c == 0) continue;
      up.push_back({w.gate[size_t(e)], ws.x + r0 * H, c, ws.gu + r0 * 2 * F, 2 * F});
      up.push_back({w.up[size_t(e)], ws.x + r0 * H, c, ws.gu + r0 * 2 * F + F, 2 * F});
      down.push_back({w.down[size_t(e)], ws.h + r0 * F, c, ws.y + r0 * H, H});
    }
    run_jobs(pool, k, up);
    swiglu(Tensor(ws.gu, DType::F32, {n, 2 * F}), Tensor(ws.h, DType::F32, {n, F}));
    run_jobs(pool, k, down);
  }

  // Combine per token in ascending expert order.
  pool.parallel_for(T, [&](int64_t b, int64_t e) {
    std::vector<int> order(static_cast<size_t>(top_k));
    for (int64_t t = b; t < e; ++t) {
      const int32_t* ex = t_expert + t * top_k;
      for (int j = 0; j < top_k; ++j) order[size_t(j)] = j;
      std::sort(order.begin(), order.end(), [&](int a, int c) { return ex[a] < ex[c] || (ex[a] == ex[c] && a < c); });
      float* o = out.ptr<float>() + t * H;
      std::fill(o, o + H, 0.0f);
      for (int j : order) {
        const float g = t_weight[t * top_k + j];
        const float* y = ws.y + slot[size_t(t * top_k + j)] * H;
        for (int64_t i = 0; i < H; ++i) o[i] += g * y[i];
      }
    }
  });
}

}  // namespace lite_llama::cpu

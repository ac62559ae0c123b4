// Runner: the forward of one step, from the scheduler's plan to one token per sampled row. It
// owns what touches tensors: the ForwardBatch built from the plan, the CUDA graphs of decode
// steps (bucket choice, padding), the decoder and backend calls, the device sampler's per-row
// parameters and the read-back of tokens or logits. The scheduler stays integers-only and the
// engine keeps the requests. Where coming features land:
//  - a prefix cache changes what a step prefills: build_batch();
//  - grammar token masks go on each row's logits before a token is picked: select().
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "core/tensor.h"
#include "engine/rank_group.h"
#include "engine/scheduler.h"
#include "lite_llama/engine.h"
#include "model/decoder.h"
#include "model/forward_batch.h"
#include "ops/ops.h"

namespace lite_llama {

namespace sampling {
class SequenceSampler;
}

// The token picked for one sampled row.
struct SampledToken {
  int32_t token = 0;
  std::vector<TokenLogprobs> logprobs;  // the token's, when its request asked for logprobs
};

// A step's constrained decoding, per sampled row (plan order): grammar masks and logit biases.
struct StepConstraints {
  int words = 0;                     // mask words per row; 0: no masks this step
  std::vector<uint32_t> masks;       // [rows * words]; all ones for a row without a grammar
  std::vector<ops::LogitBias> bias;  // sorted by row
  bool any() const { return words > 0 || !bias.empty(); }
};

struct StepResult {
  std::vector<SampledToken> rows;  // one per ScheduledSeq with `sample`, in plan order
};

class Runner {
 public:
  // `ctx`: tokens per sequence at most; `sample_limit`: logits columns past it are embedding
  // padding and never picked. `decoders[r]` is tensor-parallel rank r's (one: no parallelism);
  // `ranks` runs them together. Rank 0's logits are the model's, and it samples.
  Runner(std::vector<Decoder*> decoders, RankGroup& ranks, int ctx, int sample_limit);

  // Captures the decode graphs (forward + argmax) where the backend has graphs.
  void capture_graphs();
  int num_graphs() const { return int(graphs_.size()); }
  // Profiled steps run eagerly: the backend's per-op timing does not see into a graph.
  void set_profiling(bool on) { profiling_ = on; }
  int sample_limit() const { return sample_limit_; }
  // One eager forward of `batch` on every rank (scoring): rank 0's logits.
  Tensor forward_all(const ForwardBatch& batch) { return forward_eager(batch, false); }
  // Decoder::token_logits on every rank after forward_all: rank 0's logits.
  Tensor token_logits_all(int first, int n);

  // Runs the planned tokens through the decoder and picks the next token of every row with
  // `sample`; `samplers` holds those rows' request samplers (parameters, seed, penalties, RNG),
  // in plan order. Host-side draws advance their RNG; accepting the tokens is the caller's.
  // `constraints` (may be null) is read only after `before_select` returns; that callback runs
  // once the forward is launched, so masks computed there overlap the device's work.
  StepResult run(const StepPlan& plan, const std::vector<sampling::SequenceSampler*>& samplers,
                 const StepConstraints* constraints = nullptr,
                 const std::function<void()>& before_select = {});

 private:
  // Fills batch_ from the plan; true when every item is a single-token decode that samples.
  bool build_batch(const StepPlan& plan);
  // The forward pass: a captured graph (with argmax) for decode-only steps where one fits, else
  // eager, with the argmax when `greedy`. Returns the logits of batch_.logit_rows.
  Tensor forward(bool decode_only, bool greedy);
  // Picks the sampled rows' tokens from `logits`; `greedy`: the argmax is in device_tokens_.
  StepResult select(const StepPlan& plan, const std::vector<sampling::SequenceSampler*>& samplers,
                    const Tensor& logits, bool greedy, const StepConstraints* constraints);
  // Device sampling of non-greedy rows; false where the backend or a request needs the host.
  // lp_rows: the rows that want logprobs, their logits kept aside in `kept` (on success).
  bool sample_on_device(const StepPlan& plan,
                        const std::vector<sampling::SequenceSampler*>& samplers,
                        const Tensor& logits, int n, const StepConstraints* constraints,
                        std::vector<int32_t>& lp_rows, Tensor& kept);
  void logprobs_on_device(const std::vector<sampling::SequenceSampler*>& samplers, const Tensor& kept,
                          const std::vector<int32_t>& lp_rows, StepResult& res);
  // Rows a step may take logprobs of on the device (their logits are copied aside: 64 rows of a
  // 152k vocabulary are 39 MB); more go to the host.
  static constexpr int kMaxKeptRows = 64;
  int graph_bucket(int num_seqs) const;
  // Every rank's eager forward of `batch` (after this step's prefix table writes when
  // with_tables); rank 0's logits.
  Tensor forward_eager(const ForwardBatch& batch, bool with_tables);
  void write_tables(Decoder& d) const;

  // A prefix taken from the prefix cache: request-table entries written before the step.
  struct TableWrite {
    int32_t row, start;
    const int32_t* slots;
    int n;
  };
  std::vector<Decoder*> decoders_;
  RankGroup& ranks_;
  std::vector<TableWrite> table_writes_;
  Decoder& decoder_;
  ops::Backend& backend_;
  int ctx_, max_seqs_, sample_limit_;
  int64_t vocab_;
  ForwardBatch batch_;
  std::vector<int> graph_sizes_;
  std::vector<std::vector<int>> graphs_;  // [bucket][rank]
  bool profiling_ = false;
  bool constrained_on_device_ = false;
  std::vector<float> host_logits_;
  std::vector<float> raw_row_;  // a row before its logit biases, for its logprobs
  std::vector<int32_t> host_tokens_;
  Buffer device_tokens_;
};

}  // namespace lite_llama

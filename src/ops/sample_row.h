// Per-row parameters of device-side sampling (Backend::sample). One definition for the engine
// that fills the rows and the CUDA kernel that reads them (uploaded as they are each step), so
// it stays a plain struct of fixed-size fields.
#pragma once
#include <cstdint>

namespace lite_llama::ops {

struct SampleRow {
  float temperature = 1, top_p = 1, min_p = 0, repetition_penalty = 1, presence_penalty = 0,
        frequency_penalty = 0;
  int top_k = 0;
  int pen_offset = 0, pen_count = 0;  // this row's entries in the penalty arrays
  uint64_t seed = 0, counter = 0;     // RNG stream and position (the request's step)
};

// One OpenAI logit_bias entry of one row of a step.
struct LogitBias {
  int32_t row = 0, token = 0;
  float bias = 0;
};

// What scoring and logprobs report of one logits row (Backend::score_rows): the log-softmax value of
// the row's target token, its rank (1 + the columns whose log-softmax is strictly higher) and the
// row's argmax (lowest index on ties).
struct RowScore {
  float logprob = 0;
  int32_t rank = 0, argmax = 0;
};

// One of a row's best tokens with its log-softmax value.
struct TopToken {
  int32_t token = 0;
  float logprob = 0;
};

}  // namespace lite_llama::ops

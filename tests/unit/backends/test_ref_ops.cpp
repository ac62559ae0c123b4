// The reference ops (cpu::ref) on tiny inputs against values worked out by hand (the decimal
// constants are the closed forms in the comments, evaluated to 10 digits). Everything else is
// tested against these ops, so they must be right on their own.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "backends/cpu/ref_ops.h"
#include "core/half.h"

using namespace lite_llama;
namespace ref = lite_llama::cpu::ref;

namespace {

// fp32 results of a few operations on O(1) values: a few ulps of slack.
constexpr float kTol = 2e-6f;

void expect_near_all(const std::vector<float>& got, const std::vector<float>& want, float tol,
                     const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_NEAR(got[i], want[i], tol * std::max(1.0f, std::fabs(want[i])))
        << what << " [" << i << "]";
}

}  // namespace

TEST(RefOps, RmsNorm) {
  // Row 0: mean square (1+4+9+16)/4 = 7.5, so x / sqrt(7.5) * w.
  // Row 1: mean square (4+0+0+4)/4 = 2, so x / sqrt(2) * w.
  std::vector<float> x = {1, 2, 3, 4, -2, 0, 0, 2};
  std::vector<float> w = {1, 1, 2, 0.5f};
  std::vector<float> out(8, -99.f);
  ref::rms_norm(x.data(), w.data(), 0.0f, 2, 4, out.data());
  expect_near_all(out,
                  {0.3651483717f, 0.7302967433f, 2.1908902300f, 0.7302967433f,  //
                   -1.4142135624f, 0.f, 0.f, 0.7071067812f},
                  kTol, "rms_norm");
}

TEST(RefOps, RmsNormEpsilon) {
  // [3, 4]: mean square 12.5, + eps 0.5 = 13 -> [3, 4] / sqrt(13).
  std::vector<float> x = {3, 4}, w = {1, 1}, out(2);
  ref::rms_norm(x.data(), w.data(), 0.5f, 1, 2, out.data());
  expect_near_all(out, {0.8320502943f, 1.1094003925f}, kTol, "rms_norm eps");
}

TEST(RefOps, AddRmsNormUpdatesResidual) {
  // residual [1,1,1,1] + x [0,1,2,3] = [1,2,3,4]: then the RmsNorm case above.
  std::vector<float> res = {1, 1, 1, 1}, x = {0, 1, 2, 3}, w = {1, 1, 2, 0.5f}, out(4);
  ref::add_rms_norm(res.data(), x.data(), w.data(), 0.0f, 1, 4, out.data());
  expect_near_all(res, {1, 2, 3, 4}, 0, "residual");
  expect_near_all(out, {0.3651483717f, 0.7302967433f, 2.1908902300f, 0.7302967433f}, kTol, "out");
}

TEST(RefOps, LinearF32WithBiasAndStride) {
  // x = [[1,2,3],[-1,0,2]], W = [[1,0,-1],[2,1,0.5]], bias = [0.5,-1]
  // out[0] = [1-3+0.5, 2+2+1.5-1] = [-1.5, 4.5];  out[1] = [-1-2+0.5, -2+0+1-1] = [-2.5, -2]
  std::vector<float> x = {1, 2, 3, -1, 0, 2};
  std::vector<float> w = {1, 0, -1, 2, 1, 0.5f};
  std::vector<float> bias = {0.5f, -1};
  std::vector<float> out(6, 77.f);  // ldo = 3: the third column must stay untouched
  ref::linear(x.data(), 2, 3, w.data(), DType::F32, 2, bias.data(), out.data(), 3);
  expect_near_all(out, {-1.5f, 4.5f, 77.f, -2.5f, -2.f, 77.f}, 0, "linear+bias");
  std::vector<float> nob(4);
  ref::linear(x.data(), 2, 3, w.data(), DType::F32, 2, nullptr, nob.data(), 2);
  expect_near_all(nob, {-2.f, 5.5f, -3.f, -1.f}, 0, "linear");
}

TEST(RefOps, LinearF16Weights) {
  // The same W stored as fp16 (all values exact in fp16).
  std::vector<float> x = {1, 2, 3, -1, 0, 2};
  std::vector<uint16_t> w = {f32_to_f16(1), f32_to_f16(0), f32_to_f16(-1),
                             f32_to_f16(2), f32_to_f16(1), f32_to_f16(0.5f)};
  std::vector<float> out(4);
  ref::linear(x.data(), 2, 3, w.data(), DType::F16, 2, nullptr, out.data(), 2);
  expect_near_all(out, {-2.f, 5.5f, -3.f, -1.f}, 0, "linear f16");
}

namespace {
// Row for position 1 of a 4-dim head with inv_freq = [1, 0.01]: angles 1 and 0.01.
std::vector<float> cos_sin_pos1() {
  return {std::cos(1.0f), std::cos(0.01f), std::sin(1.0f), std::sin(0.01f)};
}
}  // namespace

TEST(RefOps, RopeNeox) {
  // Pairs (0,2) with angle 1 and (1,3) with angle 0.01:
  // [1*c1 - 3*s1, 2*c.01 - 4*s.01, 1*s1 + 3*c1, 2*s.01 + 4*c.01]
  std::vector<float> x = {1, 2, 3, 4, 1, 2, 3, 4};  // two heads, same values
  auto cs = cos_sin_pos1();
  ref::rope(x.data(), 2, 4, cs.data(), 4, ops::RopeLayout::Neox);
  std::vector<float> want = {-1.9841106486f, 1.9599006675f, 2.4623779024f, 4.0197996683f};
  want.insert(want.end(), want.begin(), want.end());
  expect_near_all(x, want, kTol, "rope neox");
}

TEST(RefOps, RopeInterleaved) {
  // Pairs (0,1) with angle 1 and (2,3) with angle 0.01:
  // [1*c1 - 2*s1, 1*s1 + 2*c1, 3*c.01 - 4*s.01, 3*s.01 + 4*c.01]
  std::vector<float> x = {1, 2, 3, 4};
  auto cs = cos_sin_pos1();
  ref::rope(x.data(), 1, 4, cs.data(), 4, ops::RopeLayout::Interleaved);
  expect_near_all(x, {-1.1426396637f, 1.9220755965f, 2.9598506679f, 4.0297995017f}, kTol,
                  "rope interleaved");
}

TEST(RefOps, RopePositionZeroIsIdentity) {
  std::vector<float> cs = {1, 1, 0, 0};
  for (auto layout : {ops::RopeLayout::Neox, ops::RopeLayout::Interleaved}) {
    std::vector<float> x = {0.5f, -1.5f, 2.5f, 7.f};
    ref::rope(x.data(), 1, 4, cs.data(), 4, layout);
    expect_near_all(x, {0.5f, -1.5f, 2.5f, 7.f}, 0, "rope pos 0");
  }
}

TEST(RefOps, RopePartialRotaryLeavesTail) {
  // rot_dim 2 of head_dim 4: only (0,1) turn (angle 1 here), dims 2 and 3 stay.
  std::vector<float> cs = {std::cos(1.0f), std::sin(1.0f)};
  for (auto layout : {ops::RopeLayout::Neox, ops::RopeLayout::Interleaved}) {
    std::vector<float> x = {1, 2, 3, 4};
    ref::rope(x.data(), 1, 4, cs.data(), 2, layout);
    expect_near_all(x, {-1.1426396637f, 1.9220755965f, 3.f, 4.f}, kTol, "rope partial");
  }
}

TEST(RefOps, Swiglu) {
  // silu(g) * u with silu(g) = g / (1 + e^-g): silu(0) = 0, silu(1) = 0.7310585786,
  // silu(-2) = -2 / (1 + e^2) = -0.2384058440. Two tokens, F = 3.
  std::vector<float> gu = {0, 1, -2, 3,  2, 1,  //
                           1, 1, 1,  -1, 0, 0.5f};
  std::vector<float> out(6);
  ref::swiglu(gu.data(), 2, 3, out.data());
  expect_near_all(out,
                  {0.f, 1.4621171573f, -0.2384058440f,  //
                   -0.7310585786f, 0.f, 0.3655292893f},
                  kTol, "swiglu");
}

TEST(RefOps, AttendThreeKeys) {
  // q = [1, 0]; keys [1,0], [0,1], [2,0] -> scores [1, 0, 2];
  // softmax = [e, 1, e^2] / (e + 1 + e^2) = [0.2447284711, 0.0900305732, 0.6652409558].
  // values [1,2], [3,-1], [0,1] -> [p0 + 3 p1, 2 p0 - p1 + p2] = [0.5148201906, 1.0646673247].
  float q[2] = {1, 0};
  float k0[2] = {1, 0}, k1[2] = {0, 1}, k2[2] = {2, 0};
  float v0[2] = {1, 2}, v1[2] = {3, -1}, v2[2] = {0, 1};
  const float* ks[3] = {k0, k1, k2};
  const float* vs[3] = {v0, v1, v2};
  std::vector<float> out(2);
  ref::attend(q, ks, vs, 3, 2, 1.0f, out.data());
  expect_near_all(out, {0.5148201906f, 1.0646673247f}, kTol, "attend");
  // scale 2 on q = [0.5, 0]: the same scores.
  float qh[2] = {0.5f, 0};
  ref::attend(qh, ks, vs, 3, 2, 2.0f, out.data());
  expect_near_all(out, {0.5148201906f, 1.0646673247f}, kTol, "attend scaled");
}

TEST(RefOps, AttendEqualScoresAverageAndSingleKey) {
  float q[2] = {0, 0};  // all scores 0: plain mean of the values
  float k0[2] = {5, 1}, k1[2] = {-3, 2};
  float v0[2] = {1, 10}, v1[2] = {3, -4};
  const float* ks[2] = {k0, k1};
  const float* vs[2] = {v0, v1};
  std::vector<float> out(2);
  ref::attend(q, ks, vs, 2, 2, 1.0f, out.data());
  expect_near_all(out, {2.f, 3.f}, kTol, "attend mean");
  float q1[2] = {100, -50};  // one key: its value whatever the score
  ref::attend(q1, ks, vs, 1, 2, 1.0f, out.data());
  expect_near_all(out, {1.f, 10.f}, kTol, "attend one key");
}

TEST(RefOps, AttendLargeScoresDoNotOverflow) {
  // Scores 1000 and 999: softmax [1, e^-1] / (1 + e^-1) = [0.7310585786, 0.2689414214].
  float q[1] = {1000};
  float k0[1] = {1}, k1[1] = {0.999f};
  float v0[1] = {1}, v1[1] = {0};
  const float* ks[2] = {k0, k1};
  const float* vs[2] = {v0, v1};
  float out[1];
  ref::attend(q, ks, vs, 2, 1, 1.0f, out);
  // 1000 * 0.999f is 999.0000 only to fp32's precision (~6e-5 off), which moves p by ~1e-5.
  EXPECT_NEAR(out[0], 0.7310585786f, 3e-5f);
}

TEST(RefOps, RopeTable) {
  // inv_freq [1, 0.01], rot_dim 4: row p = [cos p, cos 0.01p, sin p, sin 0.01p].
  float inv_freq[2] = {1.0f, 0.01f};
  std::vector<float> t(3 * 4, -9.f);
  ref::rope_table(inv_freq, 4, 3, t.data());
  // 1e-6: 0.01f is 0.01 to within 2e-10, so the angles are exact to that at p <= 2.
  expect_near_all(t,
                  {1.f, 1.f, 0.f, 0.f,                                          //
                   0.5403023059f, 0.9999500004f, 0.8414709848f, 0.0099998333f,  //
                   -0.4161468365f, 0.9998000067f, 0.9092974268f, 0.0199986667f},
                  1e-6f, "rope_table");
}

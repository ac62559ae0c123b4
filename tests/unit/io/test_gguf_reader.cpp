// GGUF reader on well-formed files built by the test writer: every metadata type in v2 and v3,
// nested arrays, alignment, tensor views and the typed accessors.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>

#include "common/gguf_writer.h"
#include "core/error.h"
#include "io/gguf.h"

using namespace lite_llama;
using lite_llama::testing::GgufTensor;
using lite_llama::testing::GgufType;
using lite_llama::testing::GgufValue;
using lite_llama::testing::GgufWriter;
namespace ggml_type = lite_llama::testing::ggml_type;

namespace {

std::unique_ptr<gguf::File> parse(const std::vector<uint8_t>& bytes) {
  return gguf::File::parse(bytes.data(), bytes.size(), "test.gguf");
}

std::vector<uint8_t> pattern(size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = uint8_t(seed + i * 7);
  return v;
}

class GgufVersions : public ::testing::TestWithParam<uint32_t> {};

TEST_P(GgufVersions, RoundTripsEveryScalarType) {
  GgufWriter w(GetParam());
  w.add("u8", GgufValue::u8(200))
      .add("i8", GgufValue::i8(-100))
      .add("u16", GgufValue::u16(60000))
      .add("i16", GgufValue::i16(-30000))
      .add("u32", GgufValue::u32(4000000000u))
      .add("i32", GgufValue::i32(-2000000000))
      .add("u64", GgufValue::u64(std::numeric_limits<uint64_t>::max()))
      .add("i64", GgufValue::i64(std::numeric_limits<int64_t>::min()))
      .add("f32", GgufValue::f32(1.5f))
      .add("f64", GgufValue::f64(-2.25e300))
      .add("t", GgufValue::boolean(true))
      .add("f", GgufValue::boolean(false))
      .add("s", GgufValue::str("héllo\nworld"))
      .add("empty", GgufValue::str(""))
      .add("nul", GgufValue::str(std::string("a\0b", 3)));
  auto f = parse(w.bytes());
  EXPECT_EQ(f->version(), GetParam());
  ASSERT_EQ(f->metadata().size(), 15u);
  EXPECT_EQ(f->metadata()[0].first, "u8");  // file order is kept
  EXPECT_EQ(f->metadata()[14].first, "nul");

  EXPECT_EQ(f->get("u8").type, gguf::ValueType::U8);
  EXPECT_EQ(f->get("u8").as_u64("u8"), 200u);
  EXPECT_EQ(f->get("i8").type, gguf::ValueType::I8);
  EXPECT_EQ(f->get("i8").as_i64("i8"), -100);
  EXPECT_EQ(f->get("u16").type, gguf::ValueType::U16);
  EXPECT_EQ(f->get("u16").as_u64("u16"), 60000u);
  EXPECT_EQ(f->get("i16").as_i64("i16"), -30000);
  EXPECT_EQ(f->get("u32").type, gguf::ValueType::U32);
  EXPECT_EQ(f->get("u32").as_u64("u32"), 4000000000u);
  EXPECT_EQ(f->get("i32").as_i64("i32"), -2000000000);
  EXPECT_EQ(f->get("u64").type, gguf::ValueType::U64);
  EXPECT_EQ(f->get("u64").as_u64("u64"), std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(f->get("i64").type, gguf::ValueType::I64);
  EXPECT_EQ(f->get("i64").as_i64("i64"), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(f->get("f32").type, gguf::ValueType::F32);
  EXPECT_EQ(f->get("f32").as_f64("f32"), 1.5);
  EXPECT_EQ(f->get("f64").type, gguf::ValueType::F64);
  EXPECT_EQ(f->get("f64").as_f64("f64"), -2.25e300);
  EXPECT_EQ(f->get("t").type, gguf::ValueType::BOOL);
  EXPECT_TRUE(f->get("t").as_bool("t"));
  EXPECT_FALSE(f->get("f").as_bool("f"));
  EXPECT_EQ(f->get("s").type, gguf::ValueType::STRING);
  EXPECT_EQ(f->get("s").as_string("s"), "héllo\nworld");
  EXPECT_EQ(f->get("empty").as_string("empty"), "");
  EXPECT_EQ(f->get("nul").as_string("nul"), std::string("a\0b", 3));
  EXPECT_TRUE(f->tensors().empty());
}

TEST_P(GgufVersions, RoundTripsArraysOfEveryType) {
  GgufWriter w(GetParam());
  w.add("u8", GgufValue::array_of<uint8_t>({1, 2, 255}))
      .add("i8", GgufValue::array_of<int8_t>({-1, 127}))
      .add("u16", GgufValue::array_of<uint16_t>({65535}))
      .add("i16", GgufValue::array_of<int16_t>({-32768, 5}))
      .add("u32", GgufValue::array_of<uint32_t>({7, 8, 9}))
      .add("i32", GgufValue::array_of<int32_t>({-7}))
      .add("u64", GgufValue::array_of<uint64_t>({1ull << 63}))
      .add("i64", GgufValue::array_of<int64_t>({-(1ll << 62)}))
      .add("f32", GgufValue::array_of<float>({0.5f, -0.25f}))
      .add("f64", GgufValue::array_of<double>({1e-300}))
      .add("bool", GgufValue::array_of<bool>({true, false, true}))
      .add("str", GgufValue::strings({"a", "", "long string with spaces"}))
      .add("empty", GgufValue::array(GgufType::F32, {}));
  auto f = parse(w.bytes());

  const auto& u8 = f->get("u8");
  EXPECT_EQ(u8.type, gguf::ValueType::ARRAY);
  EXPECT_EQ(u8.elem_type, gguf::ValueType::U8);
  ASSERT_EQ(u8.as_array("u8").size(), 3u);
  EXPECT_EQ(u8.as_array("u8")[2].as_u64("u8"), 255u);
  EXPECT_EQ(f->get("i8").as_array("i8")[0].as_i64("i8"), -1);
  EXPECT_EQ(f->get("u16").as_array("u16")[0].as_u64("u16"), 65535u);
  EXPECT_EQ(f->get("i16").as_array("i16")[0].as_i64("i16"), -32768);
  EXPECT_EQ(f->get("u32").as_array("u32")[1].as_u64("u32"), 8u);
  EXPECT_EQ(f->get("i32").as_array("i32")[0].as_i64("i32"), -7);
  EXPECT_EQ(f->get("u64").as_array("u64")[0].as_u64("u64"), 1ull << 63);
  EXPECT_EQ(f->get("i64").as_array("i64")[0].as_i64("i64"), -(1ll << 62));
  EXPECT_EQ(f->get("f32").as_array("f32")[1].as_f64("f32"), -0.25);
  EXPECT_EQ(f->get("f64").as_array("f64")[0].as_f64("f64"), 1e-300);
  const auto& b = f->get("bool").as_array("bool");
  ASSERT_EQ(b.size(), 3u);
  EXPECT_TRUE(b[0].as_bool("bool"));
  EXPECT_FALSE(b[1].as_bool("bool"));
  const auto& s = f->get("str");
  EXPECT_EQ(s.elem_type, gguf::ValueType::STRING);
  ASSERT_EQ(s.as_array("str").size(), 3u);
  EXPECT_EQ(s.as_array("str")[1].as_string("str"), "");
  EXPECT_EQ(s.as_array("str")[2].as_string("str"), "long string with spaces");
  EXPECT_EQ(f->get("empty").elem_type, gguf::ValueType::F32);
  EXPECT_TRUE(f->get("empty").as_array("empty").empty());
}

INSTANTIATE_TEST_SUITE_P(V2AndV3, GgufVersions, ::testing::Values(2u, 3u));

TEST(GgufReader, NestedArraysOfArrays) {
  // A ragged array of arrays of differing element types, and an array of arrays of strings.
  auto inner1 = GgufValue::array_of<int32_t>({1, 2, 3});
  auto inner2 = GgufValue::strings({"x", "yz"});
  auto inner3 = GgufValue::array(GgufType::U8, {});
  auto deep = GgufValue::array(
      GgufType::ARRAY, {GgufValue::array(GgufType::ARRAY, {GgufValue::array_of<float>({4.f})})});
  GgufWriter w;
  w.add("ragged", GgufValue::array(GgufType::ARRAY, {inner1, inner2, inner3}))
      .add("deep", deep)
      .add("after", GgufValue::u32(42));  // parsing resumes at the right byte
  auto f = parse(w.bytes());
  const auto& r = f->get("ragged");
  EXPECT_EQ(r.elem_type, gguf::ValueType::ARRAY);
  const auto& ra = r.as_array("ragged");
  ASSERT_EQ(ra.size(), 3u);
  EXPECT_EQ(ra[0].elem_type, gguf::ValueType::I32);
  EXPECT_EQ(ra[0].as_array("r0")[2].as_i64("r0"), 3);
  EXPECT_EQ(ra[1].elem_type, gguf::ValueType::STRING);
  EXPECT_EQ(ra[1].as_array("r1")[1].as_string("r1"), "yz");
  EXPECT_TRUE(ra[2].as_array("r2").empty());
  const auto& d = f->get("deep").as_array("deep")[0].as_array("d1")[0].as_array("d2");
  EXPECT_EQ(d[0].as_f64("d3"), 4.0);
  EXPECT_EQ(f->get_u64("after", 0), 42u);
}

// Arrays nested `levels` deep around one u8.
GgufValue nested(int levels) {
  GgufValue v = GgufValue::array_of<uint8_t>({9});
  for (int i = 1; i < levels; ++i) v = GgufValue::array(GgufType::ARRAY, {v});
  return v;
}

TEST(GgufReader, NestingUpToTheLimitIsAccepted) {
  GgufWriter w;
  w.add("k", nested(8));
  auto f = parse(w.bytes());
  const gguf::Value* v = &f->get("k");
  for (int i = 0; i < 7; ++i) v = &v->as_array("k")[0];
  EXPECT_EQ(v->as_array("k")[0].as_u64("k"), 9u);
}

TEST(GgufReader, NestingPastTheLimitIsRejected) {
  GgufWriter w;
  w.add("k", nested(9));
  try {
    parse(w.bytes());
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("nested deeper"), std::string::npos) << e.what();
  }
}

TEST(GgufReader, DefaultAlignmentIs32) {
  GgufWriter w;
  w.add("general.name", GgufValue::str("x"));  // odd-sized metadata forces padding
  w.add_f32_tensor("a", {3}, {1, 2, 3});
  w.add_f32_tensor("b", {2}, {4, 5});
  auto bytes = w.bytes();
  auto f = parse(bytes);
  EXPECT_EQ(f->alignment(), 32u);
  EXPECT_EQ(size_t(f->data_section() - bytes.data()), w.data_offset());
  EXPECT_EQ(w.data_offset() % 32, 0u);
  const auto* b = f->find_tensor("b");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->offset, 32u);  // 12 bytes of "a" padded to 32
  float v[2];
  std::memcpy(v, b->data, 8);
  EXPECT_EQ(v[0], 4.f);
  EXPECT_EQ(v[1], 5.f);
}

TEST(GgufReader, CustomAlignment) {
  for (uint32_t al : {1u, 8u, 64u, 4096u, 1u << 20}) {
    GgufWriter w;
    w.set_alignment(al);
    w.add_f32_tensor("a", {3}, {1, 2, 3});
    w.add_f32_tensor("b", {1}, {7});
    auto bytes = w.bytes();
    auto f = parse(bytes);
    EXPECT_EQ(f->alignment(), al);
    EXPECT_EQ(size_t(f->data_section() - bytes.data()), w.data_offset()) << al;
    EXPECT_EQ(f->find_tensor("b")->offset, w.tensor_offset(1)) << al;
    float v;
    std::memcpy(&v, f->find_tensor("b")->data, 4);
    EXPECT_EQ(v, 7.f) << al;
  }
}

TEST(GgufReader, AlignmentMayBeAnyIntegerType) {
  // The spec says u32, but writers differ; any integer that is a power of two is taken.
  for (auto v : {GgufValue::u64(16), GgufValue::i32(16), GgufValue::u16(16)}) {
    GgufWriter w;
    w.add("general.alignment", v);
    EXPECT_EQ(parse(w.bytes())->alignment(), 16u);
  }
}

TEST(GgufReader, FileWithoutTensorsNeedsNoPadding) {
  GgufWriter w;
  w.add("k", GgufValue::str("abc"));
  auto bytes = w.bytes();
  bytes.resize(bytes.size() - 1);  // drop one byte of the padding a writer leaves
  auto f = parse(bytes);
  EXPECT_EQ(f->get_string("k", ""), "abc");
  EXPECT_LE(f->data_section(), bytes.data() + bytes.size());  // never points past the end
}

// fmt rather than string concatenation: GCC 12 warns falsely (-Wrestrict) on short ones.
std::string tensor_name(size_t i) { return fmt::format("t{}", i); }

struct ViewCase {
  uint32_t type;
  DType dtype;
  std::vector<uint64_t> ne;
  size_t nbytes;
};

TEST(GgufReader, TensorViewsAndSizes) {
  const std::vector<ViewCase> cases = {
      {ggml_type::F32, DType::F32, {4, 3, 2}, 4 * 3 * 2 * 4},
      {ggml_type::F16, DType::F16, {5, 3}, 5 * 3 * 2},
      {ggml_type::BF16, DType::BF16, {6}, 6 * 2},
      {ggml_type::Q8_0, DType::Q8_0, {64, 3}, 2 * 3 * 34},
      {ggml_type::Q4_0, DType::Q4_0, {32, 2, 1, 2}, 4 * 18},
      {ggml_type::Q4_1, DType::Q4_1, {96}, 3 * 20},
  };
  GgufWriter w;
  for (size_t i = 0; i < cases.size(); ++i)
    w.add_tensor(tensor_name(i), cases[i].ne, cases[i].type, pattern(cases[i].nbytes, uint8_t(i)));
  auto bytes = w.bytes();
  auto f = parse(bytes);
  ASSERT_EQ(f->tensors().size(), cases.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    const ViewCase& c = cases[i];
    const auto& ti = f->tensors()[i];
    SCOPED_TRACE(ti.name);
    EXPECT_EQ(ti.name, tensor_name(i));
    EXPECT_EQ(ti.type, c.dtype);
    EXPECT_EQ(ti.nbytes, c.nbytes);
    ASSERT_EQ(ti.ne.size(), c.ne.size());
    Tensor t = ti.view();
    EXPECT_EQ(t.dtype, c.dtype);
    EXPECT_EQ(t.ndim, int(c.ne.size()));
    for (size_t d = 0; d < c.ne.size(); ++d) {
      EXPECT_EQ(ti.ne[d], int64_t(c.ne[d]));
      EXPECT_EQ(t.shape[c.ne.size() - 1 - d], int64_t(c.ne[d]));  // row-major: reversed
    }
    EXPECT_EQ(t.nbytes(), c.nbytes);
    EXPECT_EQ(t.data, ti.data);
    EXPECT_EQ(std::memcmp(ti.data, pattern(c.nbytes, uint8_t(i)).data(), c.nbytes), 0);
    EXPECT_EQ(ti.data, f->data_section() + w.tensor_offset(i));
    EXPECT_EQ(f->find_tensor(ti.name), &ti);
  }
  EXPECT_EQ(f->find_tensor("nope"), nullptr);
}

TEST(GgufReader, TensorsMayShareOrReorderData) {
  // Offsets need not follow the order of the infos; the reader checks bounds only.
  GgufWriter w;
  w.add_f32_tensor("a", {8}, {0, 1, 2, 3, 4, 5, 6, 7});
  w.add_tensor(GgufTensor{"alias", {4}, ggml_type::F32, {}, 0});
  auto f = parse(w.bytes());
  EXPECT_EQ(f->find_tensor("alias")->data, f->find_tensor("a")->data);
  EXPECT_EQ(f->find_tensor("alias")->nbytes, 16u);
}

TEST(GgufReader, TypedGettersAndDefaults) {
  GgufWriter w;
  w.add("n", GgufValue::u32(7))
      .add("neg", GgufValue::i32(-3))
      .add("big", GgufValue::u64(std::numeric_limits<uint64_t>::max()))
      .add("eps", GgufValue::f32(1e-5f))
      .add("flag", GgufValue::boolean(true))
      .add("name", GgufValue::str("smol"))
      .add("arr", GgufValue::array_of<int32_t>({1}));
  auto f = parse(w.bytes());
  EXPECT_EQ(f->get_u64("n", 0), 7u);
  EXPECT_EQ(f->get_u64("missing", 99), 99u);
  EXPECT_EQ(f->get_f64("n", 0), 7.0);  // integers widen to double
  EXPECT_FLOAT_EQ(float(f->get_f64("eps", 0)), 1e-5f);
  EXPECT_EQ(f->get_f64("missing", 0.5), 0.5);
  EXPECT_TRUE(f->get_bool("flag", false));
  EXPECT_TRUE(f->get_bool("missing", true));
  EXPECT_EQ(f->get_string("name", ""), "smol");
  EXPECT_EQ(f->get_string("missing", "dflt"), "dflt");
  EXPECT_EQ(f->get("neg").as_i64("neg"), -3);
  EXPECT_EQ(f->get("neg").as_f64("neg"), -3.0);
  EXPECT_EQ(f->get("n").as_i64("n"), 7);
  EXPECT_TRUE(f->get("n").is_int());
  EXPECT_TRUE(f->get("eps").is_number());
  EXPECT_FALSE(f->get("eps").is_int());
  EXPECT_FALSE(f->get("name").is_number());
  EXPECT_EQ(f->find("missing"), nullptr);
  ASSERT_NE(f->find("n"), nullptr);

  auto expect_error = [](auto&& fn, const std::string& needle) {
    try {
      fn();
      ADD_FAILURE() << "no error, expected one naming '" << needle << "'";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect_error([&] { f->get("missing"); }, "missing metadata key 'missing'");
  expect_error([&] { f->get("missing"); }, "test.gguf");
  expect_error([&] { f->get_u64("name", 0); }, "expected an integer");
  expect_error([&] { f->get_u64("neg", 0); }, "negative");
  expect_error([&] { f->get("big").as_i64("big"); }, "out of range");
  expect_error([&] { f->get("eps").as_i64("eps"); }, "expected an integer");
  expect_error([&] { f->get_f64("name", 0); }, "expected a number");
  expect_error([&] { f->get_bool("n", false); }, "expected bool");
  expect_error([&] { f->get_string("n", ""); }, "'n' has type u32, expected string");
  expect_error([&] { f->get("n").as_array("n"); }, "expected array");
  expect_error([&] { f->get("arr").as_string("arr"); }, "has type array");
}

TEST(GgufReader, ToString) {
  GgufWriter w;
  w.add("u", GgufValue::u32(7))
      .add("i", GgufValue::i8(-2))
      .add("f", GgufValue::f32(0.5f))
      .add("b", GgufValue::boolean(false))
      .add("t", GgufValue::boolean(true))
      .add("s", GgufValue::str("two\nlines"))
      .add("long", GgufValue::str(std::string(100, 'x')))
      .add("ctrl", GgufValue::str("a\x1b[2Jb\tc\x7f"))
      .add("utf8", GgufValue::str(fmt::format("{:x<76}\xc3\xa9\xc3\xa9yyyyyyyyyy", "")))
      .add("a", GgufValue::array_of<int32_t>({1, 2, 3}))
      .add("many", GgufValue::array_of<uint8_t>({1, 2, 3, 4, 5}))
      .add("nest", GgufValue::array(GgufType::ARRAY, {GgufValue::array_of<uint8_t>({1, 2})}));
  auto f = parse(w.bytes());
  EXPECT_EQ(f->get("u").to_string(), "7");
  EXPECT_EQ(f->get("i").to_string(), "-2");
  EXPECT_EQ(f->get("f").to_string(), "0.5");
  EXPECT_EQ(f->get("b").to_string(), "false");
  EXPECT_EQ(f->get("t").to_string(), "true");
  EXPECT_EQ(f->get("s").to_string(), "\"two lines\"");
  EXPECT_EQ(f->get("long").to_string(), fmt::format("\"{:x<77}...\"", ""));
  EXPECT_EQ(f->get("ctrl").to_string(), "\"a [2Jb c \"");  // no escape reaches the terminal
  // 77 bytes would split the first "é"; the cut backs off to the character boundary.
  EXPECT_EQ(f->get("utf8").to_string(), fmt::format("\"{:x<76}...\"", ""));
  EXPECT_EQ(f->get("a").to_string(), "i32[3] [1, 2, 3]");
  EXPECT_EQ(f->get("many").to_string(2), "u8[5] [1, 2, ...]");
  EXPECT_EQ(f->get("many").to_string(0), "u8[5] [...]");
  EXPECT_EQ(f->get("nest").to_string(), "array[1] [u8[2] [...]]");
  EXPECT_EQ(gguf::value_type_name(gguf::ValueType::F64), "f64");
  EXPECT_EQ(gguf::value_type_name(gguf::ValueType(77)), "unknown");
}

TEST(GgufReader, OpenReadsTheSameAsParse) {
  GgufWriter w(2);
  w.add("general.architecture", GgufValue::str("llama"));
  w.add_f32_tensor("w", {2, 2}, {1, 2, 3, 4});
  auto path =
      std::filesystem::temp_directory_path() / fmt::format("ll_gguf_reader_{}.gguf", ::getpid());
  lite_llama::testing::write_file(path.string(), w.bytes());
  {
    auto f = gguf::File::open(path.string());
    EXPECT_EQ(f->path(), path.string());
    EXPECT_EQ(f->version(), 2u);
    EXPECT_EQ(f->get_string("general.architecture", ""), "llama");
    float v[4];
    std::memcpy(v, f->find_tensor("w")->data, 16);
    EXPECT_EQ(v[3], 4.f);
  }
  std::filesystem::remove(path);
}

}  // namespace

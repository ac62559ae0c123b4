// GGUF reader on broken files: each must fail with lite_llama::Error naming the problem (and the
// file), never crash or read out of bounds. Run under ASan/UBSan (LITE_LLAMA_SANITIZE=ON) too.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
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
namespace fs = std::filesystem;

namespace {

constexpr uint64_t kHuge = 1ull << 62;

// Parses a heap copy of exactly the given bytes, so that ASan sees any read past the end.
std::string parse_error(const std::vector<uint8_t>& bytes, const std::string& name = "bad.gguf") {
  std::unique_ptr<uint8_t[]> copy(new uint8_t[bytes.size()]);
  std::copy(bytes.begin(), bytes.end(), copy.get());
  try {
    gguf::File::parse(copy.get(), bytes.size(), name);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

fs::path temp_path(const std::string& stem) {
  return fs::temp_directory_path() / (stem + "_" + std::to_string(::getpid()) + ".gguf");
}

std::string open_error(const std::string& path) {
  try {
    gguf::File::open(path);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// A small valid file with metadata of every kind and two tensors; the last tensor fills whole
// alignment units, so the file ends exactly where its data does.
GgufWriter valid_file() {
  GgufWriter w;
  w.add("general.architecture", GgufValue::str("llama"))
      .add("u8", GgufValue::u8(1))
      .add("i16", GgufValue::i16(-2))
      .add("u32", GgufValue::u32(3))
      .add("f32", GgufValue::f32(0.5f))
      .add("b", GgufValue::boolean(true))
      .add("u64", GgufValue::u64(5))
      .add("f64", GgufValue::f64(0.25))
      .add("toks", GgufValue::strings({"a", "bc"}))
      .add("nest", GgufValue::array(GgufType::ARRAY, {GgufValue::array_of<int32_t>({1, 2})}));
  w.add_f32_tensor("a", {3}, {1, 2, 3});
  w.add_f32_tensor("b", {4, 2}, {0, 1, 2, 3, 4, 5, 6, 7});
  return w;
}

struct Case {
  std::string what;    // test label
  std::string needle;  // substring the message must hold
  std::function<std::vector<uint8_t>()> make;
};

std::vector<Case> cases() {
  auto with = [](std::function<void(GgufWriter&)> edit) {
    return [edit] {
      GgufWriter w;
      edit(w);
      return w.bytes();
    };
  };
  // The file cut where the metadata ends, so no padding is left to be read as more fields.
  auto unpadded = [](std::function<void(GgufWriter&)> edit) {
    return [edit] {
      GgufWriter w;
      edit(w);
      auto bytes = w.bytes();
      bytes.resize(w.meta_size());
      return bytes;
    };
  };
  auto one_tensor = [with](std::vector<uint64_t> ne, uint32_t type) {
    return with([ne, type](GgufWriter& w) { w.add_tensor(GgufTensor{"t", ne, type, {}, {}}); });
  };
  return {
      {"empty file", "bad magic", [] { return std::vector<uint8_t>{}; }},
      {"three bytes", "bad magic",
       [] {
         return std::vector<uint8_t>{'G', 'G', 'U'};
       }},
      {"bad magic", "bad magic", with([](GgufWriter& w) { w.header().magic = "GGML"; })},
      {"version 1", "version 1 is not supported",
       with([](GgufWriter& w) { w.header().version = 1; })},
      {"version 99", "unsupported GGUF version 99",
       with([](GgufWriter& w) { w.header().version = 99; })},
      {"version 0", "unsupported GGUF version 0",
       with([](GgufWriter& w) { w.header().version = 0; })},
      {"big-endian file", "big-endian", with([](GgufWriter& w) { w.header().version = 3u << 24; })},
      {"huge tensor count", "tensor count",
       with([](GgufWriter& w) { w.header().n_tensors = kHuge; })},
      {"max tensor count", "tensor count",
       with([](GgufWriter& w) { w.header().n_tensors = ~0ull; })},
      {"huge metadata count", "metadata count",
       with([](GgufWriter& w) { w.header().n_kv = kHuge; })},
      {"metadata count one too many", "truncated file: reading metadata key",
       unpadded([](GgufWriter& w) {
         w.add("k", GgufValue::str("twenty characters..."));
         w.header().n_kv = 2;
       })},
      {"huge key length", "metadata key length 4611686018427387904",
       [] {
         GgufWriter w;
         w.add("k", GgufValue::u8(1));
         auto bytes = w.bytes();
         std::memcpy(bytes.data() + 24, &kHuge, 8);  // the first key's length field
         return bytes;
       }},
      {"huge string length", "length 4611686018427387904",
       with([](GgufWriter& w) { w.add("k", GgufValue::str("abc").with_count(kHuge)); })},
      {"max string length", "runs past the end",
       with([](GgufWriter& w) { w.add("k", GgufValue::str("abc").with_count(~0ull)); })},
      {"string one byte too long", "length 4 runs past the end",
       unpadded([](GgufWriter& w) { w.add("k", GgufValue::str("abc").with_count(4)); })},
      {"huge array count", "array of 4611686018427387904 elements", with([](GgufWriter& w) {
         w.add("k", GgufValue::array_of<uint32_t>({1, 2}).with_count(kHuge));
       })},
      {"huge string array count", "cannot fit",
       with([](GgufWriter& w) { w.add("k", GgufValue::strings({"a"}).with_count(1000)); })},
      {"huge nested array count", "cannot fit", with([](GgufWriter& w) {
         w.add("k", GgufValue::array(GgufType::ARRAY, {GgufValue::array_of<uint8_t>({1})})
                        .with_count(~0ull));
       })},
      {"inner array count too big", "cannot fit", with([](GgufWriter& w) {
         w.add("k", GgufValue::array(GgufType::ARRAY,
                                     {GgufValue::array_of<uint8_t>({1}).with_count(1u << 30)}));
       })},
      {"too many array elements in all", "absurd array size",
       [] {
         // The bytes are there, but the reader caps elements per file before it reads any.
         constexpr uint64_t n = (8ull << 20) + 1;
         GgufWriter w;
         w.add("small", GgufValue::array_of<uint8_t>({1, 2}));
         w.add("k", GgufValue::array(GgufType::U8, {}).with_count(n - 2));
         auto bytes = w.bytes();
         bytes.resize(w.meta_size() + n, 0);
         return bytes;
       }},
      {"nesting past the limit", "nested deeper than 8", with([](GgufWriter& w) {
         GgufValue v = GgufValue::array(GgufType::U8, {});
         for (int i = 0; i < 20; ++i) v = GgufValue::array(GgufType::ARRAY, {v});
         w.add("deep", v);
       })},
      {"unknown value type", "unknown value type 13", with([](GgufWriter& w) {
         w.add("k", GgufValue::raw(13, {0, 0, 0, 0}));
       })},
      {"unknown value type max", "unknown value type 4294967295",
       with([](GgufWriter& w) { w.add("k", GgufValue::raw(~0u, {})); })},
      {"unknown array element type", "unknown array element type 200", with([](GgufWriter& w) {
         w.add("k", GgufValue::array(GgufType::U8, {}).with_elem_type(200));
       })},
      {"bool not 0 or 1", "bool value 2 is neither 0 nor 1",
       with([](GgufWriter& w) { w.add("k", GgufValue::raw(7, {2})); })},
      {"bool in array not 0 or 1", "bool value 255", with([](GgufWriter& w) {
         w.add("k", GgufValue::array(GgufType::BOOL, {GgufValue::raw(7, {255})}));
       })},
      {"duplicate key", "duplicate metadata key 'k'",
       with([](GgufWriter& w) { w.add("k", GgufValue::u8(1)).add("k", GgufValue::u8(2)); })},
      {"alignment 0", "general.alignment 0",
       with([](GgufWriter& w) { w.add("general.alignment", GgufValue::u32(0)); })},
      {"alignment 3", "general.alignment 3",
       with([](GgufWriter& w) { w.add("general.alignment", GgufValue::u32(3)); })},
      {"alignment 2 MiB", "general.alignment 2097152",
       with([](GgufWriter& w) { w.add("general.alignment", GgufValue::u32(2u << 20)); })},
      {"alignment negative", "general.alignment",
       with([](GgufWriter& w) { w.add("general.alignment", GgufValue::i32(-32)); })},
      {"alignment a string", "general.alignment has type string",
       with([](GgufWriter& w) { w.add("general.alignment", GgufValue::str("32")); })},
      {"unknown tensor type", "unknown type id 4", one_tensor({32}, 4)},
      {"unknown tensor type big", "unknown type id 4000", one_tensor({32}, 4000)},
      {"zero dims", "0 dimensions", one_tensor({}, ggml_type::F32)},
      {"five dims", "5 dimensions", one_tensor({1, 1, 1, 1, 1}, ggml_type::F32)},
      {"zero dim", "dimension 1 has invalid size 0", one_tensor({4, 0}, ggml_type::F32)},
      {"dim over int64", "dimension 0 has invalid size 9223372036854775808",
       one_tensor({1ull << 63}, ggml_type::F32)},
      {"dims product over int64", "dimension 1 has invalid size",
       one_tensor({1ull << 32, 1ull << 32}, ggml_type::F32)},
      {"dims product over int64 late", "dimension 3 has invalid size",
       one_tensor({1u << 16, 1u << 16, 1u << 16, 1u << 16}, ggml_type::F32)},
      {"bytes over uint64", "too large", one_tensor({1ull << 62}, 28 /* F64 */)},
      {"row not a block multiple", "row of 16 is not a multiple of the Q4_0 block size 32",
       one_tensor({16, 2}, ggml_type::Q4_0)},
      {"row not a block multiple (Q8_0)", "Q8_0 block size", one_tensor({33}, ggml_type::Q8_0)},
      {"unaligned offset", "offset 4 is not aligned to 32", with([](GgufWriter& w) {
         w.add_tensor(GgufTensor{"t", {1}, ggml_type::F32, {0, 0, 0, 0, 0, 0, 0, 0}, 4});
       })},
      {"unaligned offset (custom alignment)", "not aligned to 64", with([](GgufWriter& w) {
         w.set_alignment(64);
         w.add_tensor(GgufTensor{"t", {1}, ggml_type::F32, std::vector<uint8_t>(64), 32});
       })},
      {"tensor data past the end", "outside the data section", with([](GgufWriter& w) {
         w.add_tensor(GgufTensor{"t", {64}, ggml_type::F32, {1}, {}});
       })},
      {"tensor offset past the end", "outside the data section", with([](GgufWriter& w) {
         w.add_tensor(GgufTensor{"t", {1}, ggml_type::F32, std::vector<uint8_t>(4), 1ull << 62});
       })},
      {"tensor offset wraps", "outside the data section", with([](GgufWriter& w) {
         w.add_tensor(GgufTensor{"t", {8}, ggml_type::F32, std::vector<uint8_t>(32), ~0ull << 5});
       })},
      {"huge tensor", "outside the data section", one_tensor({1ull << 40}, ggml_type::F32)},
      {"no data section", "data section starts at",
       [] {
         GgufWriter w;
         w.add_tensor(GgufTensor{"t", {1}, ggml_type::F32, {}, {}});
         auto bytes = w.bytes();
         bytes.resize(w.meta_size());  // the file stops before the aligned data start
         return bytes;
       }},
      {"duplicate tensor name", "duplicate tensor name 't'", with([](GgufWriter& w) {
         w.add_tensor("t", {8}, ggml_type::F32);
         w.add_tensor("t", {8}, ggml_type::F32);
       })},
      {"truncated tensor info", "truncated file: reading tensor", unpadded([](GgufWriter& w) {
         w.add("k", GgufValue::str(std::string(40, 'x')));
         w.header().n_tensors = 1;  // one info promised, none written
       })},
  };
}

TEST(GgufCorrupt, EachCaseNamesTheProblem) {
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.what);
    std::string msg = parse_error(c.make());
    ASSERT_FALSE(msg.empty()) << "parsed without error";
    EXPECT_NE(msg.find(c.needle), std::string::npos) << msg;
    EXPECT_NE(msg.find("bad.gguf"), std::string::npos) << msg;
  }
}

TEST(GgufCorrupt, ValidBaseFileParses) {
  auto bytes = valid_file().bytes();
  EXPECT_EQ(parse_error(bytes), "");
}

TEST(GgufCorrupt, TruncationAtEveryOffsetThrows) {
  auto bytes = valid_file().bytes();
  ASSERT_EQ(parse_error(bytes), "");
  for (size_t n = 0; n < bytes.size(); ++n) {
    std::string msg = parse_error(std::vector<uint8_t>(bytes.begin(), bytes.begin() + n));
    ASSERT_FALSE(msg.empty()) << "prefix of " << n << " bytes parsed";
    EXPECT_NE(msg.find("bad.gguf"), std::string::npos) << msg;
  }
}

TEST(GgufCorrupt, TruncationOfV2FileThrows) {
  GgufWriter w(2);
  w.add("s", GgufValue::strings({"x", "y", "zz"}));
  w.add_tensor("q", {32, 1}, ggml_type::Q8_0);  // 34 bytes: tail padding follows
  w.set_pad_tail(false);
  auto bytes = w.bytes();
  ASSERT_EQ(parse_error(bytes), "");
  for (size_t n = 0; n < bytes.size(); ++n)
    ASSERT_FALSE(parse_error(std::vector<uint8_t>(bytes.begin(), bytes.begin() + n)).empty()) << n;
}

TEST(GgufCorrupt, EveryByteFlipParsesOrThrows) {
  // Not a fuzzer, but deterministic: flip each byte of the valid file to a few values.
  auto bytes = valid_file().bytes();
  for (size_t i = 0; i < bytes.size(); ++i) {
    for (uint8_t x :
         {uint8_t(0x00), uint8_t(0xff), uint8_t(bytes[i] ^ 0x80), uint8_t(bytes[i] + 1)}) {
      auto b = bytes;
      b[i] = x;
      parse_error(b);  // either result is fine; sanitizers and the harness catch the rest
    }
  }
}

TEST(GgufCorrupt, OpenReportsTheSameErrors) {
  auto all = cases();
  for (const Case& c : all) {
    SCOPED_TRACE(c.what);
    fs::path path = temp_path("ll_gguf_corrupt");
    lite_llama::testing::write_file(path.string(), c.make());
    std::string msg = open_error(path.string());
    fs::remove(path);
    EXPECT_NE(msg.find(c.needle), std::string::npos) << msg;
    EXPECT_NE(msg.find(path.string()), std::string::npos) << msg;
  }
}

TEST(GgufCorrupt, OpenOfMissingPathOrDirectory) {
  std::string missing = (fs::temp_directory_path() / "ll_gguf_does_not_exist.gguf").string();
  std::string msg = open_error(missing);
  EXPECT_NE(msg.find("cannot open"), std::string::npos) << msg;
  EXPECT_NE(msg.find(missing), std::string::npos) << msg;

  fs::path dir = fs::temp_directory_path() / ("ll_gguf_dir_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  msg = open_error(dir.string());
  fs::remove(dir);
  EXPECT_NE(msg.find("not a regular file"), std::string::npos) << msg;
  EXPECT_NE(msg.find(dir.string()), std::string::npos) << msg;
}

// Inputs the fuzzer once crashed or stalled on (tests/fuzz/regressions/): each must now parse or
// fail cleanly, and a parsed one must be readable in full.
TEST(GgufCorrupt, FuzzRegressions) {
  fs::path dir = fs::path(LL_SOURCE_DIR) / "tests" / "fuzz" / "regressions";
  if (!fs::is_directory(dir)) GTEST_SKIP() << "no " << dir;
  size_t n = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (!entry.is_regular_file() || entry.path().filename().string()[0] == '.') continue;
    if (entry.path().extension() == ".md") continue;
    SCOPED_TRACE(entry.path().string());
    std::ifstream in(entry.path(), std::ios::binary);
    std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), {});
    std::unique_ptr<uint8_t[]> copy(new uint8_t[bytes.size()]);
    std::copy(bytes.begin(), bytes.end(), copy.get());
    std::unique_ptr<gguf::File> f;
    try {
      f = gguf::File::parse(copy.get(), bytes.size(), entry.path().string());
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(entry.path().string()), std::string::npos) << e.what();
    }
    if (f) {
      EXPECT_LE(f->data_section(), copy.get() + bytes.size());
      for (const auto& [key, v] : f->metadata()) {
        std::string text = v.to_string();
        for (char c : text) EXPECT_GE(uint8_t(c), 0x20) << key << ": " << text;
      }
      uint64_t sum = 0;
      for (const auto& t : f->tensors()) {
        EXPECT_EQ(t.view().nbytes(), t.nbytes);
        if (t.nbytes) sum += t.data[0] + t.data[t.nbytes - 1];
      }
      (void)sum;
    }
    ++n;
  }
  EXPECT_GT(n, 0u);
}

}  // namespace

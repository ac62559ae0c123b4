// Writes the seed corpus of fuzz_gguf: small valid GGUF files that between them use every value
// type, nested arrays, both versions, custom alignment and every tensor type the engine computes
// with, so the fuzzer starts from inputs that reach deep into the reader.
// Usage: fuzz_make_gguf_corpus <dir>   (scripts/fuzz --seeds regenerates tests/fuzz/corpus/gguf)
#include <cstdio>
#include <string>

#include "common/gguf_writer.h"

using namespace lite_llama::testing;

namespace {

GgufWriter every_scalar(uint32_t version) {
  GgufWriter w(version);
  w.add("u8", GgufValue::u8(1))
      .add("i8", GgufValue::i8(-1))
      .add("u16", GgufValue::u16(2))
      .add("i16", GgufValue::i16(-2))
      .add("u32", GgufValue::u32(3))
      .add("i32", GgufValue::i32(-3))
      .add("f32", GgufValue::f32(0.5f))
      .add("bool", GgufValue::boolean(true))
      .add("str", GgufValue::str("text"))
      .add("u64", GgufValue::u64(4))
      .add("i64", GgufValue::i64(-4))
      .add("f64", GgufValue::f64(0.25));
  return w;
}

GgufWriter arrays() {
  GgufWriter w(2);
  w.add("a.u8", GgufValue::array_of<uint8_t>({1, 2, 3}))
      .add("a.i32", GgufValue::array_of<int32_t>({-1, 0, 1}))
      .add("a.f32", GgufValue::array_of<float>({0.f, 1.f}))
      .add("a.bool", GgufValue::array_of<bool>({true, false}))
      .add("a.u64", GgufValue::array_of<uint64_t>({7}))
      .add("a.f64", GgufValue::array_of<double>({1.0}))
      .add("a.str", GgufValue::strings({"a", "bc", ""}))
      .add("a.empty", GgufValue::array(GgufType::I16, {}))
      .add("a.nested", GgufValue::array(GgufType::ARRAY, {GgufValue::array_of<int8_t>({1}),
                                                          GgufValue::strings({"x"}),
                                                          GgufValue::array(GgufType::ARRAY, {})}));
  return w;
}

GgufWriter tensors(uint32_t alignment) {
  GgufWriter w;
  if (alignment != 32) w.set_alignment(alignment);
  w.add_f32_tensor("f32", {2, 2}, {1, 2, 3, 4});
  w.add_tensor("f16", {3}, ggml_type::F16);
  w.add_tensor("bf16", {2, 1, 1, 2}, ggml_type::BF16);
  w.add_tensor("q8_0", {32}, ggml_type::Q8_0);
  w.add_tensor("q4_0", {32, 2}, ggml_type::Q4_0);
  w.add_tensor("q4_1", {32}, ggml_type::Q4_1);
  return w;
}

// The shape of a real model file, in miniature.
GgufWriter tiny_llama() {
  GgufWriter w;
  w.add("general.architecture", GgufValue::str("llama"))
      .add("general.name", GgufValue::str("tiny"))
      .add("llama.block_count", GgufValue::u32(1))
      .add("llama.context_length", GgufValue::u32(64))
      .add("llama.embedding_length", GgufValue::u32(32))
      .add("llama.feed_forward_length", GgufValue::u32(64))
      .add("llama.attention.head_count", GgufValue::u32(2))
      .add("llama.attention.head_count_kv", GgufValue::u32(1))
      .add("llama.rope.freq_base", GgufValue::f32(10000.f))
      .add("llama.attention.layer_norm_rms_epsilon", GgufValue::f32(1e-5f))
      .add("tokenizer.ggml.model", GgufValue::str("gpt2"))
      .add("tokenizer.ggml.tokens", GgufValue::strings({"<s>", "</s>", "a", "b", "ab"}))
      .add("tokenizer.ggml.token_type", GgufValue::array_of<int32_t>({3, 3, 1, 1, 1}))
      .add("tokenizer.ggml.merges", GgufValue::strings({"a b"}))
      .add("tokenizer.ggml.bos_token_id", GgufValue::u32(0))
      .add("tokenizer.ggml.eos_token_id", GgufValue::u32(1))
      .add("tokenizer.ggml.add_bos_token", GgufValue::boolean(true));
  w.add_tensor("token_embd.weight", {32, 5}, ggml_type::Q8_0);
  w.add_tensor("blk.0.attn_norm.weight", {32}, ggml_type::F32);
  w.add_tensor("blk.0.attn_q.weight", {32, 32}, ggml_type::Q4_1);
  w.add_tensor("output_norm.weight", {32}, ggml_type::F32);
  return w;
}

bool save(const std::string& dir, const std::string& name, const GgufWriter& w) {
  try {
    write_file(dir + "/" + name, w.bytes());
    return true;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return false;
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s <corpus dir>\n", argv[0]);
    return 2;
  }
  std::string dir = argv[1];
  bool ok =
      save(dir, "empty.gguf", GgufWriter()) && save(dir, "empty_v2.gguf", GgufWriter(2)) &&
      save(dir, "scalars_v3.gguf", every_scalar(3)) &&
      save(dir, "scalars_v2.gguf", every_scalar(2)) && save(dir, "arrays_v2.gguf", arrays()) &&
      save(dir, "tensors.gguf", tensors(32)) && save(dir, "tensors_align8.gguf", tensors(8)) &&
      save(dir, "tensors_align1.gguf", tensors(1)) && save(dir, "tiny_llama.gguf", tiny_llama());
  return ok ? 0 : 1;
}

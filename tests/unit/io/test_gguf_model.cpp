#include <gtest/gtest.h>

#include <filesystem>

#include "io/gguf.h"

using namespace lite_llama;

static std::string default_model() {
  return std::string(LL_SOURCE_DIR) + "/models/SmolLM2-135M-Instruct.Q4_1.gguf";
}

TEST(GgufModel, ReadsDefaultModel) {
  if (!std::filesystem::exists(default_model())) GTEST_SKIP() << "run scripts/fetch-model first";
  auto f = gguf::File::open(default_model());
  EXPECT_EQ(f->version(), 3u);
  EXPECT_EQ(f->get_string("general.architecture", ""), "llama");
  EXPECT_EQ(f->get_u64("llama.block_count", 0), 30u);
  EXPECT_EQ(f->get("tokenizer.ggml.tokens").as_array("t").size(), 49152u);
  EXPECT_EQ(f->tensors().size(), 272u);
  const auto* emb = f->find_tensor("token_embd.weight");
  ASSERT_NE(emb, nullptr);
  EXPECT_EQ(emb->type, DType::Q8_0);
  Tensor t = emb->view();
  EXPECT_EQ(t.shape[0], 49152);
  EXPECT_EQ(t.shape[1], 576);
  EXPECT_EQ(t.nbytes(), emb->nbytes);
}

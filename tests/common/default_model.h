// Tests that need the default model: skipped (visibly) on a developer machine that has not run
// scripts/fetch-model, but failed under CI (CI=true), where a missing model is a broken set-up.
#pragma once
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>

namespace lite_llama::testing {

inline std::string default_model_path() {
  return std::string(LL_SOURCE_DIR) + "/models/SmolLM2-135M-Instruct.Q4_1.gguf";
}

inline bool in_ci() {
  const char* ci = std::getenv("CI");
  return ci && *ci && std::string(ci) != "false" && std::string(ci) != "0";
}

}  // namespace lite_llama::testing

#define LL_REQUIRE_DEFAULT_MODEL()                                                         \
  do {                                                                                     \
    if (!std::filesystem::exists(::lite_llama::testing::default_model_path())) {           \
      if (::lite_llama::testing::in_ci()) FAIL() << "default model missing under CI";     \
      GTEST_SKIP() << "default model missing: run scripts/fetch-model";                   \
    }                                                                                      \
  } while (0)

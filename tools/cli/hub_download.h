// Downloads a model repository from the Hugging Face Hub (or a mirror) with libcurl: lists the
// files with the Hub API, fetches the ones lite-llama reads, and resumes partial downloads.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace lite_llama::cli {

struct HubOptions {
  std::string repo;                                 // ORG/NAME
  std::string revision = "main";                    // branch, tag or commit
  std::string dir;                                  // destination directory
  std::string endpoint = "https://huggingface.co";  // HF_ENDPOINT
  std::string token;                                // HF_TOKEN; empty = anonymous
  bool progress = true;                             // progress lines on stderr
};

struct HubResult {
  std::vector<std::string> downloaded, present;  // present: complete from an earlier run
  int64_t bytes = 0;                             // downloaded this run
};

// True for the files a lite-llama model directory uses: config, generation config, tokenizer
// files, safetensors weights and their index, chat template. Top-level files only.
bool hub_wanted_file(const std::string& name);

// Throws lite_llama::Error with a one-line message on a bad repository name, HTTP errors
// (401/403/404 explained) and network failures. A failed file keeps its `.part` for resuming.
HubResult hub_pull(const HubOptions& o);

}  // namespace lite_llama::cli

#include "core/error.h"
#include "engine/model_files.h"

namespace lite_llama {

// HF safetensors directories arrive with the models issue; until then say so clearly.
ModelFiles open_hf_dir(const std::string& path) {
  fail("{}: is a directory; Hugging Face model directories are not supported yet (use a .gguf file)",
       path);
}

}  // namespace lite_llama

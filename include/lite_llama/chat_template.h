// Public: a chat template given as Jinja source, rendered in place of the model's (vLLM's and
// transformers' chat_template argument).
#pragma once
#include <string>
#include <vector>

#include "lite_llama/chat.h"

namespace lite_llama {

// As Engine::apply_chat_template (same checks, variables and continue_final cut) with `source` as
// the template; bos_token / eos_token: the model's, as text. Throws lite_llama::Error for a
// template it cannot parse or render.
std::string render_chat_template(const std::string& source, const std::vector<ChatMessage>& msgs,
                                 bool add_generation_prompt, const std::string& bos_token,
                                 const std::string& eos_token, const std::string& extra_json = "",
                                 bool continue_final = false);

}  // namespace lite_llama

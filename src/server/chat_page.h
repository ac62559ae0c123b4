// The web chat page served at GET /: one self-contained HTML document.
#pragma once

namespace lite_llama::server {

const char* chat_page();

}  // namespace lite_llama::server

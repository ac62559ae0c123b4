#include "server/sse.h"

#include "server/openai_response.h"

namespace lite_llama::server {

// The JSON is one line (dump() without indentation escapes newlines inside strings), so an
// event never needs multi-line `data:` fields.
std::string sse_event(const nlohmann::json& chunk) { return "data: " + dump(chunk) + "\n\n"; }

std::string sse_done() { return "data: [DONE]\n\n"; }

}  // namespace lite_llama::server

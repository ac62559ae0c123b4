// Public face of the Jinja-subset engine: parse at construction, render from JSON contexts.
#include "template/chat_template.h"

#include "core/error.h"
#include "template/jinja_ast.h"
#include "template/jinja_eval.h"

namespace lite_llama {

ChatTemplate::ChatTemplate(std::string source)
    : source_(std::move(source)),
      body_(std::make_unique<jinja::Body>(jinja::parse_template(source_))) {}

ChatTemplate::~ChatTemplate() = default;
ChatTemplate::ChatTemplate(ChatTemplate&&) noexcept = default;
ChatTemplate& ChatTemplate::operator=(ChatTemplate&&) noexcept = default;

template <typename J>
static std::string render_json(const jinja::Body& body, J&& context) {
  if (!context.is_object() && !context.is_null())
    fail("chat template: the context must be a JSON object");
  jinja::Value ctx = context.is_null() ? jinja::Value::make_dict({})
                                       : jinja::from_json(std::forward<J>(context));
  return jinja::render(body, *ctx.dict);
}

std::string ChatTemplate::render(const nlohmann::ordered_json& context) const {
  return render_json(*body_, context);
}
std::string ChatTemplate::render(const nlohmann::json& context) const {
  return render_json(*body_, context);
}
std::string ChatTemplate::render(nlohmann::ordered_json&& context) const {
  return render_json(*body_, std::move(context));
}

std::string apply_chat_template(const ChatTemplate& t, const std::vector<ChatMessage>& msgs,
                                bool add_generation_prompt, const std::string& bos_token,
                                const std::string& eos_token, const nlohmann::ordered_json& extra) {
  nlohmann::ordered_json ctx = nlohmann::ordered_json::object();
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  for (const auto& m : msgs) {
    nlohmann::ordered_json j = nlohmann::ordered_json::object();
    // transformers aliases reasoning as {"thinking", **message, "reasoning_content"}; the key
    // order is visible to templates that iterate or tojson a message.
    if (!m.reasoning_content.empty()) j["thinking"] = m.reasoning_content;
    j["role"] = m.role;
    j["content"] = m.content;
    if (!m.reasoning_content.empty()) j["reasoning_content"] = m.reasoning_content;
    if (!m.tool_calls.empty()) {
      // Templates write arguments with tojson: give them the object, as vLLM does.
      auto calls = nlohmann::ordered_json::parse(m.tool_calls, nullptr, false);
      if (calls.is_array())
        for (auto& c : calls)
          if (c.is_object() && c.contains("function") && c["function"].is_object() &&
              c["function"].contains("arguments") && c["function"]["arguments"].is_string()) {
            auto args = nlohmann::ordered_json::parse(c["function"]["arguments"].get<std::string>(), nullptr, false);
            if (!args.is_discarded()) c["function"]["arguments"] = std::move(args);
          }
      if (!calls.is_discarded()) j["tool_calls"] = std::move(calls);
    }
    if (!m.tool_call_id.empty()) j["tool_call_id"] = m.tool_call_id;
    messages.push_back(std::move(j));
  }
  ctx["messages"] = std::move(messages);
  ctx["tools"] = nullptr;
  ctx["documents"] = nullptr;
  ctx["add_generation_prompt"] = add_generation_prompt;
  ctx["bos_token"] = bos_token;
  ctx["eos_token"] = eos_token;
  if (!extra.is_null()) {
    if (!extra.is_object()) fail("apply_chat_template: extra must be a JSON object");
    for (auto it = extra.begin(); it != extra.end(); ++it) ctx[it.key()] = it.value();
  }
  return t.render(std::move(ctx));
}

}  // namespace lite_llama

#include "server/chat_page.h"

namespace lite_llama::server {

// Plain HTML and JavaScript, no build step: the conversation lives in the page, each reply
// streams from /v1/chat/completions (fetch + ReadableStream, SSE parsed by hand). A reasoning
// model's thinking (delta.reasoning_content) goes into a folded <details class="reasoning"> above
// the answer (.answer). The element ids input, send and messages are what the browser test drives.
const char* chat_page() {
  return R"HTML(<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>lite-llama chat</title>
<style>
  body { font-family: system-ui, sans-serif; margin: 0; display: flex; flex-direction: column; height: 100vh; }
  header { padding: 8px 16px; background: #223; color: #eee; display: flex; gap: 12px; align-items: center; flex-wrap: wrap; }
  header input { width: 8em; }
  #messages { flex: 1; overflow-y: auto; padding: 16px; }
  .msg { margin: 8px 0; padding: 8px 12px; border-radius: 8px; white-space: pre-wrap; max-width: 80%; }
  .user { background: #dde8ff; margin-left: auto; }
  .assistant { background: #eee; }
  .error { background: #fdd; }
  details.reasoning { margin-bottom: 6px; color: #555; font-size: 0.9em; }
  details.reasoning summary { cursor: pointer; font-style: italic; }
  .reasoning-text { border-left: 3px solid #ccc; padding-left: 8px; margin-top: 4px; }
  form { display: flex; gap: 8px; padding: 12px 16px; border-top: 1px solid #ccc; }
  #input { flex: 1; min-height: 3em; font: inherit; }
</style>
</head>
<body>
<header>
  <strong>lite-llama</strong> <span id="model"></span>
  <label>API key <input id="api-key" type="password" autocomplete="off"></label>
  <label>temperature <input id="temperature" type="number" step="0.1" min="0" max="2" value="0.7"></label>
  <label>max tokens <input id="max-tokens" type="number" min="1" value="256"></label>
  <button id="reset" type="button">New chat</button>
</header>
<div id="messages"></div>
<form id="form">
  <textarea id="input" placeholder="Message (Enter sends, Shift+Enter breaks the line)"></textarea>
  <button id="send" type="submit">Send</button>
</form>
<script>
"use strict";
const $ = (id) => document.getElementById(id);
const conversation = [];
let busy = false;

$("api-key").value = localStorage.getItem("lite-llama-api-key") || "";
$("api-key").addEventListener("change", () => localStorage.setItem("lite-llama-api-key", $("api-key").value));

function headers() {
  const h = { "Content-Type": "application/json" };
  const key = $("api-key").value.trim();
  if (key) h["Authorization"] = "Bearer " + key;
  return h;
}

function bubble(role, text) {
  const div = document.createElement("div");
  div.className = "msg " + role;
  div.textContent = text;
  $("messages").appendChild(div);
  $("messages").scrollTop = $("messages").scrollHeight;
  return div;
}

fetch("/v1/models", { headers: headers() }).then((r) => r.json())
  .then((j) => { if (j.data && j.data.length) $("model").textContent = j.data[0].id; }).catch(() => {});

async function send() {
  const text = $("input").value.trim();
  if (!text || busy) return;
  busy = true;
  $("send").disabled = true;
  $("input").value = "";
  conversation.push({ role: "user", content: text });
  bubble("user", text);
  const out = bubble("assistant", "");
  const answer = document.createElement("span");
  answer.className = "answer";
  out.appendChild(answer);
  let reply = "", thinking = "", thought = null;
  try {
    const body = { messages: conversation, stream: true,
                   temperature: parseFloat($("temperature").value) || 0,
                   max_tokens: parseInt($("max-tokens").value) || 256 };
    const res = await fetch("/v1/chat/completions",
                            { method: "POST", headers: headers(), body: JSON.stringify(body) });
    if (!res.ok) {
      const j = await res.json().catch(() => ({}));
      throw new Error((j.error && j.error.message) || ("HTTP " + res.status));
    }
    const reader = res.body.getReader();
    const decoder = new TextDecoder();
    let buf = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buf += decoder.decode(value, { stream: true });
      let cut;
      while ((cut = buf.indexOf("\n\n")) >= 0) {
        const event = buf.slice(0, cut);
        buf = buf.slice(cut + 2);
        for (const line of event.split("\n")) {
          if (!line.startsWith("data:")) continue;  // comments and other fields
          const data = line.slice(5).trim();
          if (data === "[DONE]") continue;
          const chunk = JSON.parse(data);
          if (chunk.error) throw new Error(chunk.error.message);
          for (const c of chunk.choices || []) {
            if (c.delta && c.delta.reasoning_content) {
              if (!thought) {  // folded: the summary shows, the thinking opens on a click
                const details = document.createElement("details");
                details.className = "reasoning";
                const summary = document.createElement("summary");
                summary.textContent = "Thinking";
                thought = document.createElement("div");
                thought.className = "reasoning-text";
                details.append(summary, thought);
                out.insertBefore(details, answer);
              }
              thinking += c.delta.reasoning_content;
              thought.textContent = thinking;
            }
            if (c.delta && c.delta.content) {
              reply += c.delta.content;
              answer.textContent = reply;
              $("messages").scrollTop = $("messages").scrollHeight;
            }
          }
        }
      }
    }
    conversation.push({ role: "assistant", content: reply });
  } catch (e) {
    conversation.pop();
    out.className = "msg error";
    out.textContent = "Error: " + e.message;
  } finally {
    busy = false;
    $("send").disabled = false;
    $("input").focus();
  }
}

$("form").addEventListener("submit", (e) => { e.preventDefault(); send(); });
$("input").addEventListener("keydown", (e) => {
  if (e.key === "Enter" && !e.shiftKey) { e.preventDefault(); send(); }
});
$("reset").addEventListener("click", () => { conversation.length = 0; $("messages").innerHTML = ""; });
</script>
</body>
</html>
)HTML";
}

}  // namespace lite_llama::server

"""The web chat page at / in headless Chromium (Debian's package, driven by Playwright)."""
import json
import os
import shutil

import pytest
import requests

CHROMIUM = os.environ.get("LITE_LLAMA_CHROMIUM", "/usr/bin/chromium")


def test_page_served(server):
    r = requests.get(server.url + "/", timeout=10)
    assert r.status_code == 200 and r.headers["Content-Type"].startswith("text/html")
    for element in ('id="input"', 'id="send"', 'id="messages"', 'id="api-key"'):
        assert element in r.text


def need_chromium():
    if not shutil.which(CHROMIUM):
        if os.environ.get("CI"):
            pytest.fail(f"{CHROMIUM} missing: scripts/install-deps installs Debian's chromium")
        pytest.skip(f"{CHROMIUM} not installed (scripts/install-deps installs it)")


def launch(p):
    return p.chromium.launch(executable_path=CHROMIUM, headless=True,
                             args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"])


def test_chat_in_browser(server):
    need_chromium()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = launch(p)
        try:
            page = browser.new_page()
            page.goto(server.url + "/")
            page.fill("#max-tokens", "12")
            page.fill("#temperature", "0")
            page.fill("#input", "Hello! Who are you?")
            page.click("#send")
            page.wait_for_selector("#messages .user")
            # The reply streams into the assistant bubble; the button comes back when it ends.
            page.wait_for_function(
                "document.querySelector('#messages .assistant') &&"
                " document.querySelector('#messages .assistant').textContent.trim().length > 0",
                timeout=60000)
            page.wait_for_function("!document.querySelector('#send').disabled", timeout=60000)
            reply = page.inner_text("#messages .assistant")
            assert reply.strip() and not reply.startswith("Error")
            # A second turn keeps the conversation.
            page.fill("#input", "Thanks!")
            page.click("#send")
            page.wait_for_function("document.querySelectorAll('#messages .assistant').length == 2"
                                   " && !document.querySelector('#send').disabled", timeout=60000)
            assert len(page.query_selector_all("#messages .msg.error")) == 0
        finally:
            browser.close()


def sse(*deltas):
    chunks = [{"choices": [{"index": 0, "delta": d, "finish_reason": None}]} for d in deltas]
    chunks.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    return "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"


def test_reasoning_is_shown_folded(server):
    """A Qwen3-style stream (reasoning_content deltas, then content): the thinking sits folded above
    the answer and opens on a click; only the answer goes back into the conversation."""
    need_chromium()
    from playwright.sync_api import sync_playwright

    stream = sse({"role": "assistant", "content": ""}, {"reasoning_content": "The user greets me. "},
                 {"reasoning_content": "I greet back."}, {"content": "Hello"}, {"content": " there!"})
    sent = []

    def fake_completion(route):
        sent.append(json.loads(route.request.post_data))
        route.fulfill(status=200, headers={"Content-Type": "text/event-stream"}, body=stream)

    with sync_playwright() as p:
        browser = launch(p)
        try:
            page = browser.new_page()
            page.route("**/v1/chat/completions", fake_completion)
            page.goto(server.url + "/")
            page.fill("#input", "Hi")
            page.click("#send")
            page.wait_for_function("!document.querySelector('#send').disabled"
                                   " && document.querySelector('#messages .assistant .answer')", timeout=30000)
            assert page.inner_text("#messages .assistant .answer") == "Hello there!"
            details = page.query_selector("#messages .assistant details.reasoning")
            assert details is not None
            assert details.get_attribute("open") is None  # folded
            assert page.inner_text("#messages .assistant details.reasoning summary") == "Thinking"
            assert not page.is_visible("#messages .assistant .reasoning-text")
            page.click("#messages .assistant details.reasoning summary")
            assert page.is_visible("#messages .assistant .reasoning-text")
            assert page.inner_text("#messages .assistant .reasoning-text") == "The user greets me. I greet back."
            # The next turn sends the answer back, not the thinking.
            page.fill("#input", "Thanks")
            page.click("#send")
            page.wait_for_function("document.querySelectorAll('#messages .assistant').length == 2"
                                   " && !document.querySelector('#send').disabled", timeout=30000)
            assert sent[1]["messages"][1] == {"role": "assistant", "content": "Hello there!"}
        finally:
            browser.close()

"""The web chat page at / in headless Chromium (Debian's package, driven by Playwright)."""
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


def test_chat_in_browser(server):
    if not shutil.which(CHROMIUM):
        if os.environ.get("CI"):
            pytest.fail(f"{CHROMIUM} missing: scripts/install-deps installs Debian's chromium")
        pytest.skip(f"{CHROMIUM} not installed (scripts/install-deps installs it)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True,
                                    args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"])
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

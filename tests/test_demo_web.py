"""`advisorchain demo --web` in a real headless browser (Debian's chromium, driven by
Playwright's Python package): a question answered, a cancellation approved in the page,
the turn inspector filled. `ADVISORCHAIN_SCREENSHOT=docs/demo-web.png` keeps the
screenshot (docs/ui.md shows it)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = "/usr/bin/chromium"
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@pytest.fixture(scope="module")
def demo_url() -> Iterator[str]:
    port = _free_port()
    command = [sys.executable, "-m", "advisorchain", "demo", "--web", "--model", "scripted"]
    process = subprocess.Popen([*command, "--port", str(port)], stdout=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or process.poll() is not None:
                    raise RuntimeError("the demo server did not start") from None
                time.sleep(0.2)
        yield f"http://127.0.0.1:{port}/"
    finally:
        process.terminate()
        process.wait(timeout=10)


def test_the_page_answers_and_a_cancellation_is_approved_in_it(
    demo_url: str, tmp_path: Path
) -> None:
    if not Path(CHROMIUM).exists():
        pytest.fail("Debian's chromium is not installed: run `make ui-clients`")
    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 820})
            page.goto(demo_url)
            page.fill("#question", "Where is my order A-1001?")
            page.click("#send")
            expect(page.locator(".answer").first).to_contain_text("A-1001", timeout=20_000)
            expect(page.locator("#send")).to_be_enabled(timeout=20_000)
            expect(page.locator(".tool").first).to_contain_text("get_order_status")

            page.fill("#question", "Please cancel my order A-1002.")
            page.click("#send")
            approve = page.locator(".approval .approve")
            expect(approve).to_be_visible(timeout=20_000)
            expect(page.locator(".approval textarea")).to_have_value('{"order_id":"A-1002"}')
            approve.click()
            answer = page.locator(".answer").nth(1)
            expect(answer).to_contain_text("A-1002", timeout=20_000)
            expect(page.locator(".tool[data-outcome=ok]")).to_have_count(3)
            inspector = page.locator("#inspector")
            expect(inspector).to_contain_text("cancel_order")
            expect(inspector).to_contain_text("approved")
            expect(inspector.locator(".summary").nth(1)).to_contain_text("1 approvals")
            expect(inspector.locator(".summary").nth(1)).to_contain_text("model calls")
            shot = os.environ.get("ADVISORCHAIN_SCREENSHOT") or str(tmp_path / "demo-web.png")
            page.screenshot(path=shot, full_page=True)
            assert Path(shot).stat().st_size > 10_000
        finally:
            browser.close()


@pytest.fixture
def two_cancellations_url() -> Iterator[str]:
    """The demo page over a model that asks to cancel two orders in one round."""
    import threading

    import uvicorn

    from advisorchain import ChatRequest, ToolCall, ToolMessage
    from advisorchain.demo.web import WebDemo
    from advisorchain.providers import ScriptedChatModel

    def reply(request: ChatRequest) -> Any:
        last = request.messages[-1]
        if isinstance(last, ToolMessage):
            return "Both cancellations are answered."
        return [
            ToolCall.from_arguments("cancel_order", {"order_id": "A-1002"}, id="c1"),
            ToolCall.from_arguments("cancel_order", {"order_id": "A-1003"}, id="c2"),
        ]

    port = _free_port()
    app = WebDemo(ScriptedChatModel(reply))
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 30
        while not server.started:
            if time.monotonic() > deadline or not thread.is_alive():
                raise RuntimeError("the demo server did not start")
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def test_two_approvals_of_one_run_resume_it_once(two_cancellations_url: str) -> None:
    """Each interrupt of a run gets its buttons; the page resumes once all are answered
    (one resume answers every interrupt of the run: a second would find the turn used)."""
    if not Path(CHROMIUM).exists():
        pytest.fail("Debian's chromium is not installed: run `make ui-clients`")
    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        try:
            page = browser.new_page()
            page.goto(two_cancellations_url)
            page.fill("#question", "Cancel A-1002 and A-1003.")
            page.click("#send")
            boxes = page.locator(".approval")
            expect(boxes).to_have_count(2, timeout=20_000)
            expect(boxes.nth(0).locator("textarea")).to_have_value('{"order_id":"A-1002"}')
            expect(boxes.nth(1).locator("textarea")).to_have_value('{"order_id":"A-1003"}')
            boxes.nth(0).locator(".approve").click()
            expect(page.locator(".answer")).to_have_count(0)  # waits for the other answer
            boxes.nth(1).locator(".reject").click()
            expect(page.locator(".answer").first).to_contain_text(
                "Both cancellations are answered.", timeout=20_000
            )
            expect(page.locator(".msg.error")).to_have_count(0)
            expect(page.locator(".tool[data-outcome=rejected]")).to_have_count(1)
            expect(page.locator("#inspector .summary").first).to_contain_text("2 approvals")
        finally:
            browser.close()

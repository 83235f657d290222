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

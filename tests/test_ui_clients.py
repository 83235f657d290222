"""The protocol apps checked by the real clients, in node, over 127.0.0.1: `@ag-ui/client`'s
`HttpAgent` and the `ai` package's chat transport and `readUIMessageStream` (what
`useChat` runs), each through tool calls whose arguments stream, an approval and the
resumed turn; and through an approval inside a sub-agent (a chain called as a tool).

The clients are pinned in tests/ui_clients/package-lock.json; `make test` installs them
(`.ci/ui-clients`). Without them this test fails, it does not skip.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

CLIENTS = Path(__file__).parent / "ui_clients"
USER_AGUI = {"id": "m1", "role": "user", "content": "Wait"}
USER_VERCEL = {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "Wait"}]}


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    if shutil.which("node") is None or not (CLIENTS / "node_modules" / "ai").is_dir():
        pytest.fail("the UI clients are not installed: run `make ui-clients`")
    port = _free_port()
    process = subprocess.Popen([sys.executable, str(CLIENTS / "serve.py"), str(port)])
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or process.poll() is not None:
                    raise RuntimeError("the test server did not start") from None
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait(timeout=10)


def run_node(script: str, *args: str) -> Any:
    done = subprocess.run(
        ["node", script, *args], cwd=CLIENTS, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_ag_ui_client_runs_a_turn_through_an_interrupt(server: str) -> None:
    result = run_node("agui_client.mjs", f"{server}/agui", "approve")
    (interrupt,) = result["interrupts"]
    assert interrupt["reason"] == "tool_approval" and interrupt["toolCallId"] == "call_refund"
    events = result["events"]
    assert events.count("RUN_STARTED") == 2 and events.count("RUN_FINISHED") == 2
    assert "RUN_ERROR" not in events
    messages = result["messages"]
    tool_results = {m["toolCallId"]: m["content"] for m in messages if m["role"] == "tool"}
    assert tool_results["call_refund"] == "refunded 12 EUR for order 7"
    assert "shipped" in tool_results["call_look"]
    assert messages[-1] == {
        "id": messages[-1]["id"],
        "role": "assistant",
        "content": "Order 7 is refunded: 12 EUR.",
    }
    assert result["pendingAfter"] == []
    # the tool loop's calls streamed their arguments, piece by piece, to the client
    assert len(result["args"]["call_look"]) > 1
    assert json.loads("".join(result["args"]["call_look"])) == {"order_id": "7"}
    assert json.loads("".join(result["args"]["call_refund"])) == {"order_id": "7", "amount": 12}


def test_ag_ui_client_approves_inside_a_sub_agent(server: str) -> None:
    result = run_node("agui_client.mjs", f"{server}/agui-nested", "approve")
    (interrupt,) = result["interrupts"]
    assert interrupt["toolCallId"] == "call_billing"
    assert interrupt["metadata"]["toolName"] == "refund"
    assert json.loads(interrupt["metadata"]["arguments"]) == {"order_id": "7", "amount": 12}
    assert "RUN_ERROR" not in result["events"]
    messages = result["messages"]
    tool_results = {m["toolCallId"]: m["content"] for m in messages if m["role"] == "tool"}
    assert tool_results == {"call_billing": "Refunded 12 EUR."}
    assert messages[-1]["content"] == "Billing says: Refunded 12 EUR."
    assert result["pendingAfter"] == []


def test_ag_ui_client_rejects(server: str) -> None:
    result = run_node("agui_client.mjs", f"{server}/agui", "reject")
    tool_results = {
        m["toolCallId"]: m["content"] for m in result["messages"] if m["role"] == "tool"
    }
    assert "not today" in tool_results["call_refund"]
    assert "refunded" not in tool_results["call_refund"]


def test_ai_sdk_reads_a_turn_through_an_approval(server: str) -> None:
    result = run_node("vercel_client.mjs", f"{server}/vercel", "approve")
    first, second = result["first"], result["second"]
    parts = {p.get("toolCallId"): p for p in first["parts"] if p["type"].startswith("tool-")}
    assert parts["call_look"]["state"] == "output-available"
    assert parts["call_look"]["output"] == {"order_id": "7", "status": "shipped"}
    assert parts["call_refund"]["state"] == "approval-requested"
    assert parts["call_refund"]["input"] == {"order_id": "7", "amount": 12}
    assert second["id"] == first["id"]  # the resumed stream continued the same message
    parts = {p.get("toolCallId"): p for p in second["parts"] if p["type"].startswith("tool-")}
    assert parts["call_refund"]["state"] == "output-available"
    assert parts["call_refund"]["output"] == "refunded 12 EUR for order 7"
    texts = [p["text"] for p in second["parts"] if p["type"] == "text"]
    assert texts == ["Order 7 is refunded: 12 EUR."]
    assert second["metadata"]["usage"]["totalTokens"] > 0
    # the client showed each call's input while it streamed, growing to the whole input
    streamed = result["streaming"]
    assert len(streamed["call_look"]) > 1 and json.loads(streamed["call_look"][-1]) == {
        "order_id": "7"
    }
    assert json.loads(streamed["call_refund"][-1]) == {"order_id": "7", "amount": 12}


@pytest.mark.parametrize(
    ("decision", "state"), [("approve", "output-available"), ("reject", "output-denied")]
)
def test_ai_sdk_answers_an_approval_inside_a_sub_agent(
    server: str, decision: str, state: str
) -> None:
    result = run_node("vercel_client.mjs", f"{server}/vercel-nested", decision)
    first, second = result["first"], result["second"]
    nested = "call_billing/call_refund"
    parts = {p.get("toolCallId"): p for p in first["parts"] if p["type"].startswith("tool-")}
    assert parts[nested]["type"] == "tool-refund"
    assert parts[nested]["state"] == "approval-requested"
    assert parts[nested]["input"] == {"order_id": "7", "amount": 12}
    parts = {p.get("toolCallId"): p for p in second["parts"] if p["type"].startswith("tool-")}
    assert parts[nested]["state"] == state
    billing = parts["call_billing"]
    assert billing["state"] == "output-available"
    if decision == "approve":
        assert parts[nested]["output"] == "refunded 12 EUR for order 7"
        assert billing["output"] == "Refunded 12 EUR."
    else:
        assert billing["output"] == "Could not refund."
    texts = [p["text"] for p in second["parts"] if p["type"] == "text"]
    assert texts == [f"Billing says: {billing['output']}"]


def test_ai_sdk_denied(server: str) -> None:
    result = run_node("vercel_client.mjs", f"{server}/vercel", "reject")
    parts = {
        p.get("toolCallId"): p for p in result["second"]["parts"] if p["type"].startswith("tool-")
    }
    assert parts["call_refund"]["state"] == "output-denied"


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("agui-hang", {"threadId": "t", "runId": "r", "messages": [USER_AGUI]}),
        ("vercel-hang", {"id": "c", "messages": [USER_VERCEL], "trigger": "submit-message"}),
    ],
)
def test_a_client_that_goes_away_cancels_the_turn_over_a_socket(
    server: str, path: str, body: dict[str, Any]
) -> None:
    """A real connection to uvicorn closed while a tool runs: the tool is cancelled."""

    def state_when(ready: Callable[[dict[str, int]], bool]) -> dict[str, int]:
        deadline = time.monotonic() + 20
        while True:
            state: dict[str, int] = httpx.get(f"{server}/hang").json()
            if ready(state) or time.monotonic() > deadline:
                return state
            time.sleep(0.05)

    before = state_when(lambda state: True)
    with httpx.Client(timeout=30) as client:
        with client.stream("POST", f"{server}/{path}", json=body) as response:
            assert response.status_code == 200
            running = state_when(lambda state: state["started"] > before["started"])
            assert running == {"started": before["started"] + 1, "cancelled": before["cancelled"]}
        # the response is closed: the client went away while the tool ran
    after = state_when(lambda state: state["cancelled"] > before["cancelled"])
    assert after == {"started": before["started"] + 1, "cancelled": before["cancelled"] + 1}

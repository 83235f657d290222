"""Issue 35 item 3: `ToolCallFinished` comes as each call of a round ends (with its own
duration), not when the round's slowest call ends: on the in-process stream and through
both UI protocols. The slow call here ends only once the consumer has seen the fast
call's end, so the old behaviour (every end reported after the round) deadlocks and
fails at `fail_after`."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import anyio
import pytest

from advisorchain import (
    Approve,
    Chain,
    ResponseCompleted,
    ToolCall,
    ToolCallFinished,
    ToolCallingAdvisor,
    UserMessage,
    tool,
)
from advisorchain.advisors import ApprovalAdvisor, DeferredApprover, InMemoryApprovalStore
from advisorchain.providers import ScriptedChatModel
from advisorchain.ui import AgUiApp, VercelChatApp

pytestmark = pytest.mark.anyio


def round_chain() -> tuple[Chain, anyio.Event]:
    release = anyio.Event()

    @tool
    async def fast() -> str:
        """Answers at once."""
        return "fast done"

    @tool
    async def slow() -> str:
        """Answers when released."""
        await release.wait()
        return "slow done"

    model = ScriptedChatModel(
        [
            [
                ToolCall.from_arguments("slow", {}, id="call_slow"),
                ToolCall.from_arguments("fast", {}, id="call_fast"),
            ],
            "Both done.",
        ]
    )
    return Chain([ToolCallingAdvisor()], model=model, tools=[fast, slow]), release


async def test_the_in_process_stream_reports_each_call_as_it_ends() -> None:
    chain, release = round_chain()
    finished: list[ToolCallFinished] = []
    with anyio.fail_after(10):
        async for event in chain.stream("go"):
            if isinstance(event, ToolCallFinished):
                finished.append(event)
                if event.call.id == "call_fast":
                    release.set()
    assert [e.call.id for e in finished] == ["call_fast", "call_slow"]
    fast, slow = finished
    assert fast.result.text == "fast done" and slow.result.text == "slow done"
    assert fast.duration < slow.duration  # the slow call outlived the fast one's report


async def _serve(app: Any, body: dict[str, Any], on_frame: Callable[[Any], None]) -> list[Any]:
    raw = json.dumps(body).encode()
    frames: list[Any] = []
    received = False

    async def receive() -> dict[str, Any]:
        nonlocal received
        if not received:
            received = True
            return {"type": "http.request", "body": raw, "more_body": False}
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    async def send(message: Any) -> None:
        chunk = message.get("body", b"")
        for line in chunk.decode().splitlines():
            if line.startswith("data: ") and line != "data: [DONE]":
                frame = json.loads(line[6:])
                frames.append(frame)
                on_frame(frame)

    scope = {
        "type": "http",
        "method": "POST",
        "path": "/",
        "headers": [(b"content-type", b"application/json"), (b"host", b"127.0.0.1:8000")],
    }
    with anyio.fail_after(10):
        await app(scope, receive, send)
    return frames


async def test_ag_ui_reports_each_result_as_it_comes() -> None:
    chain, release = round_chain()

    def on_frame(frame: Any) -> None:
        if frame["type"] == "TOOL_CALL_RESULT" and frame["toolCallId"] == "call_fast":
            release.set()

    body = {
        "threadId": "t",
        "runId": "r",
        "messages": [{"id": "1", "role": "user", "content": "go"}],
    }
    frames = await _serve(AgUiApp(chain), body, on_frame)
    results = [f["toolCallId"] for f in frames if f["type"] == "TOOL_CALL_RESULT"]
    assert results == ["call_fast", "call_slow"]
    durations = {
        f["value"]["toolCallId"]: f["value"]["duration"]
        for f in frames
        if f.get("name") == "advisorchain.tool_call_finished"
    }
    assert 0 <= durations["call_fast"] < durations["call_slow"]  # each call's own time


async def test_vercel_reports_each_output_as_it_comes() -> None:
    chain, release = round_chain()

    def on_frame(frame: Any) -> None:
        if frame["type"] == "tool-output-available" and frame["toolCallId"] == "call_fast":
            release.set()

    body = {
        "id": "c",
        "messages": [{"id": "1", "role": "user", "parts": [{"type": "text", "text": "go"}]}],
    }
    frames = await _serve(VercelChatApp(chain), body, on_frame)
    outputs = [f["toolCallId"] for f in frames if f["type"] == "tool-output-available"]
    assert outputs == ["call_fast", "call_slow"]
    durations = {
        f["data"]["toolCallId"]: f["data"]["duration"]
        for f in frames
        if f["type"] == "data-tool-call" and f["data"]["state"] == "finished"
    }
    assert 0 <= durations["call_fast"] < durations["call_slow"]  # each call's own time


async def test_a_resumed_round_reports_each_settled_call_as_it_ends() -> None:
    """The calls a resume settles (two approvals) end one by one too."""
    release = anyio.Event()

    @tool(requires_approval=True)
    async def fast() -> str:
        """Answers at once."""
        return "fast done"

    @tool(requires_approval=True)
    async def slow() -> str:
        """Answers when released."""
        await release.wait()
        return "slow done"

    model = ScriptedChatModel(
        [
            [
                ToolCall.from_arguments("slow", {}, id="call_slow"),
                ToolCall.from_arguments("fast", {}, id="call_fast"),
            ],
            "Both done.",
        ]
    )
    approvals = ApprovalAdvisor(DeferredApprover(), store=InMemoryApprovalStore())
    chain = Chain([ToolCallingAdvisor(), approvals], model=model, tools=[fast, slow])
    deferred = await chain.call("go")
    assert {d.id for d in deferred.deferred} == {"call_slow", "call_fast"}
    transcript = [UserMessage(content="go"), *deferred.messages]
    decisions = {"call_slow": Approve(), "call_fast": Approve()}
    finished: list[ToolCallFinished] = []
    with anyio.fail_after(10):
        async for event in chain.stream(transcript, decisions=decisions):
            if isinstance(event, ToolCallFinished):
                finished.append(event)
                if event.call.id == "call_fast":
                    release.set()
            last = event
    assert [e.call.id for e in finished] == ["call_fast", "call_slow"]
    assert finished[0].duration < finished[1].duration
    assert isinstance(last, ResponseCompleted) and last.response.text == "Both done."

"""Progress for tool authors: `ToolContext.report_progress` from a local `@tool`, as
`ToolProgress` events on the stream path, harmless on the call path, bounded, and
restarting a tool's `idle_timeout` clock on both paths."""

from __future__ import annotations

import threading
import time

import anyio
import anyio.lowlevel
import pytest

from advisorchain import (
    Chain,
    ChatResponse,
    ResponseCompleted,
    StreamEvent,
    Tool,
    ToolCall,
    ToolCallDelta,
    ToolCallFinished,
    ToolCallingAdvisor,
    ToolCallStarted,
    ToolContext,
    ToolIdleTimeoutError,
    ToolMessage,
    ToolProgress,
    tool,
)
from advisorchain.core.errors import ToolDefinitionError
from advisorchain.providers import ScriptedChatModel

pytestmark = pytest.mark.anyio


@tool(reports_progress=True)
async def crawl(pages: int, context: ToolContext) -> str:
    """Crawl some pages."""
    for page in range(1, pages + 1):
        context.report_progress(page, pages, f"page {page}")
        await anyio.lowlevel.checkpoint()
    return f"crawled {pages}"


@tool(reports_progress=True)
def crunch(steps: int, context: ToolContext) -> str:
    """A sync tool: runs in a worker thread."""
    assert threading.current_thread() is not threading.main_thread()
    for step in range(1, steps + 1):
        context.report_progress(step, steps)
    return f"crunched {steps}"


@tool
async def quiet(context: ToolContext) -> str:
    """Reports progress without declaring it."""
    context.report_progress(1, 2, "half")
    return "quiet done"


async def _run(
    tools: list[Tool], call: ToolCall, *, streamed: bool
) -> tuple[ChatResponse, list[StreamEvent]]:
    chain = Chain([ToolCallingAdvisor()], model=ScriptedChatModel([call, "ok"]), tools=tools)
    if not streamed:
        return await chain.call("go"), []
    events = [event async for event in chain.stream("go")]
    last = events[-1]
    assert isinstance(last, ResponseCompleted)
    return last.response, events


def _results(response: ChatResponse) -> list[ToolMessage]:
    return [m for m in response.messages if isinstance(m, ToolMessage)]


async def test_a_tool_reports_progress_as_events_between_start_and_finish() -> None:
    call = ToolCall.from_arguments("crawl", {"pages": 3}, id="c1")
    response, events = await _run([crawl], call, streamed=True)
    kinds = [type(e).__name__ for e in events]
    progress = [e for e in events if isinstance(e, ToolProgress)]
    assert [(p.call_id, p.progress, p.total, p.message) for p in progress] == [
        ("c1", 1.0, 3.0, "page 1"),
        ("c1", 2.0, 3.0, "page 2"),
        ("c1", 3.0, 3.0, "page 3"),
    ]
    started = kinds.index("ToolCallStarted")
    finished = kinds.index("ToolCallFinished")
    assert all(started < i < finished for i, k in enumerate(kinds) if k == "ToolProgress")
    assert _results(response)[0].text == "crawled 3"


async def test_a_sync_tool_reports_from_its_worker_thread() -> None:
    call = ToolCall.from_arguments("crunch", {"steps": 4}, id="c1")
    response, events = await _run([crunch], call, streamed=True)
    progress = [(e.call_id, e.progress) for e in events if isinstance(e, ToolProgress)]
    assert progress == [("c1", 1.0), ("c1", 2.0), ("c1", 3.0), ("c1", 4.0)]
    assert _results(response)[0].text == "crunched 4"


@pytest.mark.parametrize("name", ["crawl", "crunch"])
async def test_on_the_call_path_reporting_is_harmless(name: str) -> None:
    call = ToolCall.from_arguments(name, {"pages": 2} if name == "crawl" else {"steps": 2})
    response, _ = await _run([crawl, crunch], call, streamed=False)
    result = _results(response)[0]
    assert not result.is_error
    assert result.text in ("crawled 2", "crunched 2")


async def test_an_undeclared_tool_reports_nothing_and_fails_nothing() -> None:
    call = ToolCall.from_arguments("quiet", {}, id="c1")
    response, events = await _run([quiet], call, streamed=True)
    assert not [e for e in events if isinstance(e, ToolProgress)]
    assert _results(response)[0].text == "quiet done"


async def test_a_flooding_tool_is_bounded_by_dropping() -> None:
    @tool(reports_progress=True)
    async def flood(context: ToolContext) -> str:
        """Report far more than any consumer reads, without yielding."""
        for i in range(20_000):
            context.report_progress(i, message="x" * 5000)
        return "flooded"

    call = ToolCall.from_arguments("flood", {}, id="c1")
    response, events = await _run([flood], call, streamed=True)
    progress = [e for e in events if isinstance(e, ToolProgress)]
    # the buffer (and one more, when the reader was already waiting): the rest were dropped
    assert 0 < len(progress) <= 257
    assert all(p.message is not None and len(p.message) == 1000 for p in progress)
    assert _results(response)[0].text == "flooded"


@pytest.mark.parametrize("streamed", [False, True])
async def test_bad_progress_values_are_a_clear_error_on_both_paths(streamed: bool) -> None:
    @tool(reports_progress=True)
    async def wrong(context: ToolContext) -> str:
        """Reports nonsense."""
        context.report_progress("half")  # type: ignore[arg-type]
        return "never"

    response, _ = await _run([wrong], ToolCall.from_arguments("wrong", {}), streamed=streamed)
    result = _results(response)[0]
    assert result.is_error
    assert "progress must be a number or None, not str" in result.text


@tool(idle_timeout=1.0)
async def busy(steps: int, context: ToolContext) -> str:
    """Works longer than its idle timeout, reporting all along."""
    for step in range(steps):
        await anyio.sleep(0.1)
        context.report_progress(step)
    return "busy done"


@tool(idle_timeout=1.0)
def busy_sync(steps: int, context: ToolContext) -> str:
    """Works longer than its idle timeout in a worker thread, reporting all along."""
    for step in range(steps):
        time.sleep(0.1)
        context.report_progress(step)
    return "busy done"


@tool(idle_timeout=0.3)
async def stuck(context: ToolContext) -> str:
    """Reports once, then hangs."""
    context.report_progress(0, message="starting")
    await anyio.sleep_forever()
    return "never"


@pytest.mark.parametrize("streamed", [False, True])
@pytest.mark.parametrize("name", ["busy", "busy_sync"])
async def test_reports_keep_a_call_alive_past_its_idle_timeout(streamed: bool, name: str) -> None:
    call = ToolCall.from_arguments(name, {"steps": 15})  # 1.5 s of work, 1 s idle timeout
    response, _ = await _run([busy, busy_sync], call, streamed=streamed)
    result = _results(response)[0]
    assert not result.is_error, result.text
    assert result.text == "busy done"


@pytest.mark.parametrize("streamed", [False, True])
async def test_a_silent_call_is_abandoned_after_its_idle_timeout(streamed: bool) -> None:
    call = ToolCall.from_arguments("stuck", {}, id="c1")
    response, events = await _run([stuck], call, streamed=streamed)
    result = _results(response)[0]
    assert result.is_error
    assert result.text == (
        "Error: ToolIdleTimeoutError: 'stuck' reported no progress for 0.3 s and was abandoned"
    )
    if streamed:
        finished = [e for e in events if isinstance(e, ToolCallFinished)]
        assert finished[0].outcome == "error"
        assert [e.message for e in events if isinstance(e, ToolProgress)] == ["starting"]


async def test_the_idle_timeout_error_can_stop_the_turn() -> None:
    chain = Chain(
        [ToolCallingAdvisor(on_tool_error="raise")],
        model=ScriptedChatModel([ToolCall.from_arguments("stuck", {}), "ok"]),
        tools=[stuck],
    )
    with pytest.raises(Exception) as raised:
        await chain.call("go")
    assert isinstance(raised.value.__cause__, ToolIdleTimeoutError)


def test_an_idle_timeout_must_be_positive_and_implies_reporting() -> None:
    with pytest.raises(ToolDefinitionError, match="idle_timeout must be a positive number"):
        Tool("t", "t", handler=lambda a, c: "x", idle_timeout=0)
    assert busy.reports_progress and busy.idle_timeout == 1.0
    assert not quiet.reports_progress


async def test_a_nested_turn_on_the_call_path_does_not_leak_into_the_outer_stream() -> None:
    inner = Chain(
        [ToolCallingAdvisor()],
        model=ScriptedChatModel([ToolCall.from_arguments("crawl", {"pages": 2}, id="in1"), "x"]),
        tools=[crawl],
    )

    @tool(reports_progress=True)
    async def delegate(context: ToolContext) -> str:
        """Runs another chain's turn with `call` (no stream of its own)."""
        context.report_progress(0, message="delegating")
        return (await inner.call("crawl")).text

    call = ToolCall.from_arguments("delegate", {}, id="out1")
    _, events = await _run([delegate], call, streamed=True)
    progress = [(e.call_id, e.message) for e in events if isinstance(e, ToolProgress)]
    assert progress == [("out1", "delegating")]  # never the inner call's "in1" events
    assert isinstance(events[0], ToolCallDelta)  # the outer model's fragment of its call
    assert isinstance(events[1], ToolCallStarted)

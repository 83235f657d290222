"""How `ToolProgress` reaches the stream (core/progress.py), with plain tools that report
progress as MCP tools and sub-chains do: order, errors, early close, the call path."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from advisorchain import (
    Chain,
    ResponseCompleted,
    StreamEvent,
    Tool,
    ToolCall,
    ToolCallFinished,
    ToolCallingAdvisor,
    ToolContext,
    ToolExecutionError,
    ToolProgress,
)
from advisorchain.core.progress import current_progress_sink
from advisorchain.providers import ScriptedChatModel


def _reporting_tool(
    fail: bool = False, wait: anyio.Event | None = None, ended: list[str] | None = None
) -> Tool:
    async def handler(arguments: dict[str, Any], context: ToolContext) -> str:
        sink = current_progress_sink()
        try:
            if sink is not None:
                for step in (1, 2):
                    await sink.send(ToolProgress(context.call_id, progress=step, total=2))
            if wait is not None:
                await wait.wait()
        except anyio.get_cancelled_exc_class():
            if ended is not None:
                ended.append("cancelled")
            raise
        if fail:
            raise RuntimeError("broken")
        return "done" if sink is not None else "done without a sink"

    return Tool("job", "A job.", None, handler, metadata={"reports_progress": True})


def _chain(tool: Tool, **options: Any) -> Chain:
    model = ScriptedChatModel([ToolCall.from_arguments("job", {}, id="c1"), "ok"])
    return Chain([ToolCallingAdvisor(**options)], model=model, tools=[tool])


@pytest.mark.anyio
async def test_progress_comes_before_the_calls_finish_event() -> None:
    events: list[StreamEvent] = [e async for e in _chain(_reporting_tool()).stream("go")]
    kinds = [type(e).__name__ for e in events if not type(e).__name__.endswith("Delta")]
    assert kinds == [
        "ToolCallStarted",
        "ToolProgress",
        "ToolProgress",
        "ToolCallFinished",
        "ResponseCompleted",
    ]
    finished = next(e for e in events if isinstance(e, ToolCallFinished))
    assert finished.result.text == "done"


@pytest.mark.anyio
async def test_on_the_call_path_there_is_no_sink() -> None:
    response = await _chain(_reporting_tool()).call("go")
    assert response.messages[1].text == "done without a sink"


@pytest.mark.anyio
async def test_a_raising_tool_raises_itself_not_a_group() -> None:
    chain = _chain(_reporting_tool(fail=True), on_tool_error="raise")
    with pytest.raises(ToolExecutionError, match="broken"):
        async for _ in chain.stream("go"):
            pass


@pytest.mark.anyio
async def test_closing_the_stream_during_a_call_cancels_it() -> None:
    ended: list[str] = []
    stream = _chain(_reporting_tool(wait=anyio.Event(), ended=ended)).stream("go")
    async for event in stream:
        if isinstance(event, ToolProgress):
            break
    await stream.aclose()  # type: ignore[attr-defined]
    assert ended == ["cancelled"]


@pytest.mark.anyio
async def test_a_round_without_reporting_tools_streams_as_before() -> None:
    plain = Tool("job", "A job.", None, lambda arguments, context: "plain", run_inline=True)
    events = [e async for e in _chain(plain).stream("go")]
    assert not any(isinstance(e, ToolProgress) for e in events)
    assert isinstance(events[-1], ResponseCompleted)

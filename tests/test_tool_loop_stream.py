"""The tool loop's stream path: deltas, tool-call fragments included, pass through live."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest

from advisorchain import (
    AssistantMessage,
    Chain,
    ChatRequest,
    ChatResponse,
    ResponseCompleted,
    StreamEvent,
    TextDelta,
    ToolCall,
    ToolCallDelta,
    ToolCallFinished,
    ToolCallingAdvisor,
    ToolCallStarted,
    Usage,
    tool,
)
from advisorchain.providers import ScriptedChatModel


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    if key == "bad":
        raise KeyError(key)
    return f"value of {key}"


def call(tool_name: str, id: str, **arguments: Any) -> ToolCall:
    return ToolCall.from_arguments(tool_name, arguments, id=id)


@pytest.mark.anyio
async def test_stream_passes_fragments_and_reports_tool_progress() -> None:
    model = ScriptedChatModel(
        [
            AssistantMessage(
                content="Let me check.",
                tool_calls=(call("lookup", "1", key="a"), call("lookup", "2", key="bad")),
            ),
            "Here you go.",
        ],
        chunk_size=2,
    )
    chain = Chain([ToolCallingAdvisor()], model=model, tools=[lookup])
    events = [e async for e in chain.stream("go")]
    # the model's fragments reach the caller, in order, before the loop runs the calls
    fragments = [e for e in events if isinstance(e, ToolCallDelta)]
    assert len(fragments) > 2
    by_index: dict[int, str] = {}
    for fragment in fragments:
        by_index[fragment.index] = by_index.get(fragment.index, "") + fragment.arguments
    assert by_index == {0: '{"key":"a"}', 1: '{"key":"bad"}'}
    assert {f.index: f.id for f in fragments if f.id} == {0: "1", 1: "2"}
    kinds = [type(e).__name__ for e in events]
    last_fragment = len(kinds) - 1 - kinds[::-1].index("ToolCallDelta")
    assert last_fragment < kinds.index("ToolCallStarted")
    text = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert text == "Let me check.Here you go."
    started = [e for e in events if isinstance(e, ToolCallStarted)]
    finished = [e for e in events if isinstance(e, ToolCallFinished)]
    assert [e.call.id for e in started] == ["1", "2"]
    # each call's end is reported when it happens: in the order they finished
    assert sorted((e.call.id, e.outcome) for e in finished) == [("1", "ok"), ("2", "error")]
    assert next(e for e in finished if e.call.id == "1").result.content == "value of a"
    assert all(e.duration >= 0 for e in finished)
    assert kinds.index("ToolCallStarted") < kinds.index("ToolCallFinished")
    final = events[-1]
    assert isinstance(final, ResponseCompleted)
    assert final.response.usage.requests == 2
    assert final.response.text == "Here you go."
    assert [m.role for m in final.response.messages] == ["assistant", "tool", "tool", "assistant"]
    # the fragments were assembled into the same calls the model meant
    first = final.response.messages[0]
    assert isinstance(first, AssistantMessage)
    assert first.tool_calls == (
        call("lookup", "1", key="a"),
        call("lookup", "2", key="bad"),
    )


@pytest.mark.anyio
async def test_call_and_stream_agree() -> None:
    def script() -> list[Any]:
        return [call("lookup", "1", key="a"), "answer"]

    called = await Chain(
        [ToolCallingAdvisor()], model=ScriptedChatModel(script()), tools=[lookup]
    ).call("q")
    streamed = [
        e
        async for e in Chain(
            [ToolCallingAdvisor()], model=ScriptedChatModel(script()), tools=[lookup]
        ).stream("q")
    ][-1]
    assert isinstance(streamed, ResponseCompleted)
    assert streamed.response.messages == called.messages
    assert streamed.response.finish_reason == called.finish_reason
    assert streamed.response.usage == called.usage


class GatedModel:
    """Streams one delta, then waits until the consumer has seen it."""

    def __init__(self) -> None:
        self.consumer_saw_delta = anyio.Event()
        self.closed = False

    async def call(self, request: ChatRequest) -> ChatResponse:
        raise NotImplementedError

    async def stream(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        try:
            yield TextDelta("first ")
            with anyio.fail_after(5):
                await self.consumer_saw_delta.wait()
            yield TextDelta("second")
            yield ResponseCompleted(
                ChatResponse(message=AssistantMessage(content="first second"), usage=Usage(1, 1))
            )
        finally:
            self.closed = True


@pytest.mark.anyio
async def test_text_arrives_while_the_model_is_still_generating() -> None:
    model = GatedModel()
    chain = Chain([ToolCallingAdvisor()], model=model)
    texts: list[str] = []
    async for event in chain.stream("go"):
        if isinstance(event, TextDelta):
            texts.append(event.text)
            model.consumer_saw_delta.set()
    assert texts == ["first ", "second"]


@pytest.mark.anyio
async def test_abandoned_stream_closes_the_model_stream() -> None:
    model = GatedModel()
    chain = Chain([ToolCallingAdvisor()], model=model)
    stream = chain.stream("go")
    first = await stream.__anext__()
    assert first == TextDelta("first ")
    await stream.aclose()  # type: ignore[attr-defined]
    assert model.closed


@pytest.mark.anyio
async def test_return_direct_on_the_stream_path() -> None:
    @tool(return_direct=True)
    def link(order_id: str) -> str:
        """Order link."""
        return f"/orders/{order_id}"

    model = ScriptedChatModel([[call("link", "1", order_id="5")]])
    events = [e async for e in Chain([ToolCallingAdvisor()], model=model, tools=[link]).stream("q")]
    final = events[-1]
    assert isinstance(final, ResponseCompleted)
    assert final.response.finish_reason == "return_direct"
    assert final.response.text == "/orders/5"

"""Advisor hooks: call, stream, call_tool, call_model, function advisors, contributed tools."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest

from advisorchain import (
    Advisor,
    AssistantMessage,
    CallNext,
    Chain,
    ChainConfigurationError,
    ChatRequest,
    ChatResponse,
    Placement,
    ResponseCompleted,
    StreamEvent,
    StreamNext,
    SystemMessage,
    TextDelta,
    Tool,
    ToolCall,
    ToolCallingAdvisor,
    ToolInvocation,
    ToolMessage,
    ToolNext,
    ToolResult,
    advisor,
    tool,
)
from advisorchain.providers import ScriptedChatModel


@tool
def echo(text: str) -> str:
    """Echo."""
    return text


def call(tool_name: str, id: str, **arguments: Any) -> ToolCall:
    return ToolCall.from_arguments(tool_name, arguments, id=id)


class ToolRecorder(Advisor):
    def __init__(self, name: str, log: list[str]) -> None:
        self.label = name
        self.log = log

    async def call_tool(self, invocation: ToolInvocation, next: ToolNext) -> ToolResult:
        self.log.append(f"{self.label}>{invocation.call.id}")
        result = await next(invocation)
        self.log.append(f"<{self.label}")
        return result


@pytest.mark.anyio
async def test_call_tool_hooks_wrap_every_execution_in_chain_order() -> None:
    log: list[str] = []
    model = ScriptedChatModel([call("echo", "1", text="a"), "done"])
    chain = Chain(
        [ToolRecorder("outer", log), ToolCallingAdvisor(), ToolRecorder("inner", log)],
        model=model,
        tools=[echo],
    )
    await chain.call("go")
    assert log == ["outer>1", "inner>1", "<inner", "<outer"]


class ArgumentRewriter(Advisor):
    async def call_tool(self, invocation: ToolInvocation, next: ToolNext) -> ToolResult:
        if invocation.arguments.get("text") == "secret":
            return ToolResult(content="refused", outcome="rejected")
        return await next(invocation.with_arguments({"text": invocation.arguments["text"].upper()}))


@pytest.mark.anyio
async def test_call_tool_can_short_circuit_and_rewrite_arguments() -> None:
    model = ScriptedChatModel(
        [[call("echo", "1", text="hi"), call("echo", "2", text="secret")], "done"]
    )
    chain = Chain([ToolCallingAdvisor(), ArgumentRewriter()], model=model, tools=[echo])
    response = await chain.call("go")
    results = [m for m in response.messages if isinstance(m, ToolMessage)]
    assert [(m.content, m.is_error) for m in results] == [("HI", False), ("refused", True)]


@pytest.mark.anyio
async def test_rewritten_arguments_are_validated_again() -> None:
    class Breaks(Advisor):
        async def call_tool(self, invocation: ToolInvocation, next: ToolNext) -> ToolResult:
            return await next(invocation.with_arguments({"text": 5}))

    model = ScriptedChatModel([call("echo", "1", text="hi"), "done"])
    response = await Chain([ToolCallingAdvisor(), Breaks()], model=model, tools=[echo]).call("go")
    result = response.messages[1]
    assert isinstance(result, ToolMessage) and result.is_error
    assert "text: Input should be a valid string" in result.content


class Retry(Advisor):
    """Calls next again when the model fails once (`call` only: a stream may have started)."""

    single_path = True

    async def call(self, request: ChatRequest, next: CallNext) -> ChatResponse:
        try:
            return await next(request)
        except ConnectionError:
            return await next(request)


@pytest.mark.anyio
async def test_a_link_may_call_next_several_times() -> None:
    model = ScriptedChatModel([ConnectionError("flaky"), "second try"])
    response = await Chain([Retry()], model=model).call("go")
    assert response.text == "second try"
    assert len(model.requests) == 2


class Canned(Advisor):
    async def call(self, request: ChatRequest, next: CallNext) -> ChatResponse:
        if "forbidden" in request.messages[-1].text:
            return ChatResponse(message=AssistantMessage(content="I can't help with that."))
        return await next(request)

    async def stream(self, request: ChatRequest, next: StreamNext) -> AsyncIterator[StreamEvent]:
        if "forbidden" in request.messages[-1].text:
            message = AssistantMessage(content="I can't help with that.")
            yield TextDelta(message.text)
            yield ResponseCompleted(ChatResponse(message=message))
            return
        async for event in next(request):
            yield event


@pytest.mark.anyio
async def test_a_link_may_short_circuit() -> None:
    model = ScriptedChatModel(["fine"])
    chain = Chain([Canned()], model=model)
    assert (await chain.call("forbidden topic")).text == "I can't help with that."
    events = [e async for e in chain.stream("forbidden topic")]
    assert isinstance(events[-1], ResponseCompleted)
    assert model.requests == []
    assert (await chain.call("ok topic")).text == "fine"


@pytest.mark.anyio
async def test_function_advisor_rewrites_request_and_response() -> None:
    async def system_prompt(request: ChatRequest) -> ChatRequest:
        return request.with_messages((SystemMessage(content="Be terse."), *request.messages))

    async def shout(response: ChatResponse) -> ChatResponse:
        return response.with_message(AssistantMessage(content=response.text.upper()))

    link = advisor(before=system_prompt, after=shout)
    model = ScriptedChatModel(["hello", "hello"])
    chain = Chain([link], model=model)
    response = await chain.call("hi")
    assert response.text == "HELLO"
    assert response.messages == (response.message,)
    events = [e async for e in chain.stream("hi")]
    assert isinstance(events[-1], ResponseCompleted)
    assert events[-1].response.text == "HELLO"
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "hello"
    assert [r.messages[0] for r in model.requests] == [SystemMessage(content="Be terse.")] * 2
    assert link.name == "system_prompt"


@pytest.mark.anyio
async def test_function_advisor_stream_and_call_tool_hooks() -> None:
    seen: list[str] = []

    async def prefix(request: ChatRequest, next: StreamNext) -> AsyncIterator[StreamEvent]:
        yield TextDelta(">> ")
        async for event in next(request):
            yield event

    async def audit(invocation: ToolInvocation, next: ToolNext) -> ToolResult:
        seen.append(invocation.name)
        return await next(invocation)

    model = ScriptedChatModel([call("echo", "1", text="x"), "done"])
    chain = Chain(
        [
            advisor(stream=prefix, call_tool=audit, name="mixed", single_path=True),
            ToolCallingAdvisor(),
        ],
        model=model,
        tools=[echo],
    )
    events = [e async for e in chain.stream("go")]
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == ">> done"
    assert seen == ["echo"]
    with pytest.raises(TypeError):
        advisor()


class ModelCallCounter(Advisor):
    def __init__(self) -> None:
        self.turns = 0
        self.model_calls = 0
        self.streamed_model_calls = 0

    async def before(self, request: ChatRequest) -> ChatRequest:
        self.turns += 1
        return request

    async def call_model(self, request: ChatRequest, next: CallNext) -> ChatResponse:
        self.model_calls += 1
        return await next(request)

    async def stream_model(
        self, request: ChatRequest, next: StreamNext
    ) -> AsyncIterator[StreamEvent]:
        self.streamed_model_calls += 1
        async for event in next(request):
            yield event


@pytest.mark.anyio
async def test_call_model_sees_every_round_wherever_the_advisor_sits() -> None:
    counter = ModelCallCounter()
    model = ScriptedChatModel(
        [call("echo", "1", text="a"), call("echo", "2", text="b"), "done"] * 2
    )
    chain = Chain([counter, ToolCallingAdvisor()], model=model, tools=[echo])
    await chain.call("go")
    assert (counter.turns, counter.model_calls) == (1, 3)
    async for _ in chain.stream("go"):
        pass
    assert counter.streamed_model_calls == 3


class Searcher(Advisor):
    @property
    def tools(self) -> Sequence[Tool]:
        return [echo]

    def bind(self, placement: Placement) -> Advisor:
        if not placement.inside_tool_loop:
            raise ChainConfigurationError("Searcher must come after ToolCallingAdvisor")
        return self


@pytest.mark.anyio
async def test_advisor_tools_and_placement_checks() -> None:
    model = ScriptedChatModel(["ok"])
    await Chain([ToolCallingAdvisor(), Searcher()], model=model).call("go")
    assert [t.name for t in model.requests[0].tools] == ["echo"]
    with pytest.raises(ChainConfigurationError, match="after ToolCallingAdvisor"):
        Chain([Searcher(), ToolCallingAdvisor()], model=model)

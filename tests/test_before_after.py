"""`before`/`after` on both paths, the refusal of one-sided advisors, and one copy of the answer."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from dataclasses import replace

import pytest

from advisorchain import (
    Advisor,
    AssistantMessage,
    CallNext,
    Chain,
    ChainConfigurationError,
    ChatRequest,
    ChatResponse,
    ResponseCompleted,
    StreamEvent,
    StreamNext,
    SystemMessage,
    TextDelta,
    ToolCall,
    ToolCallingAdvisor,
    ToolMessage,
    UserMessage,
    advisor,
    tool,
)
from advisorchain.providers import ScriptedChatModel


@tool
def echo(text: str) -> str:
    """Echo."""
    return text


class Steering(Advisor):
    """Adds a system message before; tags the answer after."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    async def before(self, request: ChatRequest) -> ChatRequest:
        self.seen.append("before")
        return request.with_messages((SystemMessage(content="Be brief."), *request.messages))

    async def after(self, response: ChatResponse) -> ChatResponse:
        self.seen.append("after")
        if response.tool_calls:  # a round of the loop asking for tools: keep the calls
            return response
        return response.with_message(AssistantMessage(content=f"[{response.text}]"))


async def run_both(chain: Chain, prompt: str) -> tuple[ChatResponse, ChatResponse, str]:
    called = await chain.call(prompt)
    events = [e async for e in chain.stream(prompt)]
    final = events[-1]
    assert isinstance(final, ResponseCompleted)
    text = "".join(e.text for e in events if isinstance(e, TextDelta))
    return called, final.response, text


@pytest.mark.anyio
async def test_before_and_after_apply_on_both_paths() -> None:
    steering = Steering()
    model = ScriptedChatModel(["hello", "hello"])
    called, streamed, deltas = await run_both(Chain([steering], model=model), "hi")
    assert called.text == streamed.text == "[hello]"
    assert called.messages == streamed.messages == (AssistantMessage(content="[hello]"),)
    assert deltas == "hello"  # `after` changes the response, not the deltas already sent
    assert [r.messages[0] for r in model.requests] == [SystemMessage(content="Be brief.")] * 2
    assert steering.seen == ["before", "after"] * 2


@pytest.mark.anyio
async def test_before_and_after_inside_the_loop_see_every_round() -> None:
    steering = Steering()
    script: list[ToolCall | str] = [ToolCall.from_arguments("echo", {"text": "x"}, id="c1"), "done"]
    model = ScriptedChatModel(script * 2)
    chain = Chain([ToolCallingAdvisor(), steering], model=model, tools=[echo])
    called, streamed, _ = await run_both(chain, "go")
    assert steering.seen == ["before", "after"] * 4
    assert called.messages == streamed.messages
    assert called.text == "[done]"


class Wrapping(Advisor):
    """`before`, then its own `call`/`stream`, then `after`: one link's order."""

    def __init__(self, log: list[str]) -> None:
        self.log = log

    async def before(self, request: ChatRequest) -> ChatRequest:
        self.log.append("before")
        return request

    async def after(self, response: ChatResponse) -> ChatResponse:
        self.log.append("after")
        return response

    async def call(self, request: ChatRequest, next: CallNext) -> ChatResponse:
        self.log.append("call>")
        response = await next(request)
        self.log.append("<call")
        return response

    async def stream(self, request: ChatRequest, next: StreamNext) -> AsyncIterator[StreamEvent]:
        self.log.append("call>")
        async for event in next(request):
            if isinstance(event, ResponseCompleted):
                self.log.append("<call")
            yield event


@pytest.mark.anyio
async def test_a_links_before_and_after_wrap_its_own_call_and_stream() -> None:
    log: list[str] = []
    chain = Chain([Wrapping(log)], model=ScriptedChatModel(["a", "b"]))
    await run_both(chain, "hi")
    assert log == ["before", "call>", "<call", "after"] * 2


class CallOnly(Advisor):
    async def call(self, request: ChatRequest, next: CallNext) -> ChatResponse:
        return await next(request)


class StreamOnly(Advisor):
    async def stream(self, request: ChatRequest, next: StreamNext) -> AsyncIterator[StreamEvent]:
        async for event in next(request):
            yield event


class ModelCallOnly(Advisor):
    async def call_model(self, request: ChatRequest, next: CallNext) -> ChatResponse:
        return await next(request)


@pytest.mark.parametrize(
    ("link", "given", "missing", "path"),
    [
        (CallOnly(), "call", "stream", "stream"),
        (StreamOnly(), "stream", "call", "call"),
        (ModelCallOnly(), "call_model", "stream_model", "stream"),
    ],
)
def test_an_advisor_wrapping_one_path_is_refused(
    link: Advisor, given: str, missing: str, path: str
) -> None:
    with pytest.raises(ChainConfigurationError) as raised:
        Chain([ToolCallingAdvisor(), link], model=ScriptedChatModel([]))
    message = str(raised.value)
    assert f"advisor {type(link).__name__} overrides {given} but not {missing}" in message
    assert f"chain.{path} would silently skip it" in message
    assert "before(request) / after(response)" in message
    assert f"or override {missing} too" in message


def test_a_function_advisor_wrapping_one_path_is_refused() -> None:
    @advisor
    async def house_style(request: ChatRequest, next: CallNext) -> ChatResponse:
        return await next(request)

    with pytest.raises(ChainConfigurationError) as raised:
        Chain([house_style], model=ScriptedChatModel([]))
    message = str(raised.value)
    assert "advisor house_style has call= but no stream=" in message
    assert "give before=/after= instead" in message
    assert "or give stream= too" in message


@pytest.mark.anyio
async def test_single_path_is_accepted_loudly_and_skipped_on_the_other_path(
    caplog: pytest.LogCaptureFixture,
) -> None:
    seen: list[str] = []

    class CallRetry(Advisor):
        single_path = True

        async def call(self, request: ChatRequest, next: CallNext) -> ChatResponse:
            seen.append("call")
            return await next(request)

    with caplog.at_level(logging.WARNING, logger="advisorchain"):
        chain = Chain([CallRetry()], model=ScriptedChatModel(["a", "b"]))
    assert "CallRetry overrides call but not stream (single_path=True): chain.stream skips it" in (
        caplog.text
    )
    await run_both(chain, "hi")
    assert seen == ["call"]


def test_advisor_needs_a_hook() -> None:
    with pytest.raises(TypeError, match="before, after, call, stream, call_tool"):
        advisor()


# -- one copy of the answer -----------------------------------------------------------------


def test_message_is_the_last_assistant_message_of_messages() -> None:
    call = ToolCall.from_arguments("echo", {"text": "x"}, id="c1")
    asked = AssistantMessage(tool_calls=(call,))
    result = ToolMessage(tool_call_id="c1", name="echo", content="x")
    answer = AssistantMessage(content="done")
    response = ChatResponse(messages=(asked, result, answer))
    assert response.message is answer
    pending = ChatResponse(messages=(asked, result), finish_reason="deferred")
    assert pending.message is asked
    single = ChatResponse(message=answer)
    assert single.messages == (answer,)
    assert ChatResponse(message=answer, messages=(asked, result, answer)) == response


def test_a_response_whose_answer_would_diverge_is_refused() -> None:
    answer = AssistantMessage(content="done")
    with pytest.raises(ValueError, match="last assistant message"):
        ChatResponse(message=AssistantMessage(content="other"), messages=(answer,))
    with pytest.raises(ValueError, match="last assistant message"):
        # replace() hands message= on to __init__; mypy checks replace()'s keywords
        # against the fields only, and `message` is not stored as a field
        replace(
            ChatResponse(message=answer),
            message=AssistantMessage(content="other"),  # type: ignore[call-arg]
        )
    with pytest.raises(ValueError, match="assistant message"):
        ChatResponse(messages=(UserMessage(content="hi"),))
    with pytest.raises(ValueError):
        ChatResponse()


def test_with_message_replaces_the_answer_where_memory_reads_it() -> None:
    call = ToolCall.from_arguments("echo", {"text": "x"}, id="c1")
    asked = AssistantMessage(tool_calls=(call,))
    result = ToolMessage(tool_call_id="c1", name="echo", content="x")
    response = ChatResponse(
        messages=(asked, result, AssistantMessage(content="secret")), model="m", id="r1"
    )
    redacted = response.with_message(AssistantMessage(content="[redacted]"))
    assert redacted.text == "[redacted]"
    assert redacted.messages == (asked, result, AssistantMessage(content="[redacted]"))
    assert (redacted.model, redacted.id, redacted.usage) == ("m", "r1", response.usage)
    assert response.text == "secret"  # the original is unchanged
    again = replace(redacted, messages=(*redacted.messages[:-1], AssistantMessage(content="b")))
    assert again.text == "b"

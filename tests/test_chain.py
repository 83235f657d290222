"""Chain: prompts, responses, streams, nesting, order, default tools and tool context."""

from __future__ import annotations

import contextvars
from collections.abc import AsyncIterator

import pytest

from advisorchain import (
    Advisor,
    AssistantMessage,
    Chain,
    ChainConfigurationError,
    ChatModel,
    ChatOptions,
    ChatRequest,
    ChatResponse,
    ResponseCompleted,
    StreamEvent,
    StreamInterruptedError,
    StreamNext,
    SystemMessage,
    TextDelta,
    ToolCall,
    ToolCallingAdvisor,
    ToolContext,
    UserMessage,
    advisor,
    dump_messages,
    tool,
)
from advisorchain.providers import ScriptedChatModel


@tool
def read_order(order_id: str, ctx: ToolContext) -> str:
    """Read an order."""
    return f"order {order_id} of {ctx['tenant_id']}"


@tool
def cancel_order(order_id: str) -> str:
    """Cancel an order."""
    return f"cancelled {order_id}"


@pytest.mark.anyio
async def test_prompt_forms() -> None:
    model = ScriptedChatModel(["a", "b", "c"])
    chain = Chain([], model=model)
    await chain.call("hi")
    await chain.call([SystemMessage(content="be brief"), UserMessage(content="hi")])
    await chain.call(ChatRequest(messages=(UserMessage(content="hi"),)))
    assert [len(r.messages) for r in model.requests] == [1, 2, 1]
    assert model.requests[1].messages[0] == SystemMessage(content="be brief")


@pytest.mark.anyio
async def test_response_fields() -> None:
    chain = Chain([], model=ScriptedChatModel(["hello there"]))
    response = await chain.call("hi")
    assert response.text == "hello there"
    assert response.message == AssistantMessage(content="hello there")
    assert response.finish_reason == "stop"
    assert response.usage.requests == 1 and response.usage.output_tokens > 0
    assert response.messages == (response.message,)


@pytest.mark.anyio
async def test_options_merge_and_unknown_option() -> None:
    model = ScriptedChatModel(["x", "y"])
    chain = Chain([], model=model, options=ChatOptions(model="m1", temperature=0.5))
    await chain.call("hi", max_tokens=10, stop="END")
    assert model.requests[0].options == ChatOptions(
        model="m1", temperature=0.5, max_tokens=10, stop=("END",)
    )
    await chain.call("hi", options=ChatOptions(temperature=0.0, extra={"seed": 1}))
    assert model.requests[1].options.temperature == 0.0
    assert model.requests[1].options.extra == {"seed": 1}
    with pytest.raises(TypeError, match="unknown chat option"):
        await chain.call("hi", temprature=1)


@pytest.mark.anyio
async def test_stream_ends_with_exactly_one_response_completed() -> None:
    chain = Chain([], model=ScriptedChatModel(["hello world"]))
    events = [e async for e in chain.stream("hi")]
    assert [type(e) for e in events[:-1]] == [TextDelta] * (len(events) - 1)
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "hello world"
    assert isinstance(events[-1], ResponseCompleted)
    assert events[-1].response.text == "hello world"


class Broken(Advisor):
    single_path = True  # it breaks the stream contract; call has none to break

    def __init__(self, mode: str) -> None:
        self.mode = mode

    async def stream(self, request: ChatRequest, next: StreamNext) -> AsyncIterator[StreamEvent]:
        async for event in next(request):
            if isinstance(event, ResponseCompleted):
                if self.mode == "twice":
                    yield event
                    yield event
                continue
            yield event


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["drop", "twice"])
async def test_stream_contract_is_enforced(mode: str) -> None:
    chain = Chain([Broken(mode)], model=ScriptedChatModel(["hello"]))
    with pytest.raises(StreamInterruptedError):
        async for _ in chain.stream("hi"):
            pass


@pytest.mark.anyio
async def test_a_chain_is_a_chat_model_and_chains_nest() -> None:
    inner_model = ScriptedChatModel(
        [ToolCall.from_arguments("cancel_order", {"order_id": "7"}), "ok"]
    )
    inner = Chain([ToolCallingAdvisor()], model=inner_model, tools=[cancel_order])
    assert isinstance(inner, ChatModel)
    outer = Chain([], model=inner)
    response = await outer.call("cancel 7")
    assert response.text == "ok"
    assert [m.role for m in response.messages] == ["assistant", "tool", "assistant"]
    events = [
        e async for e in Chain([], model=Chain([], model=ScriptedChatModel(["x"]))).stream("q")
    ]
    assert isinstance(events[-1], ResponseCompleted)


@pytest.mark.anyio
async def test_list_order_is_the_order() -> None:
    seen: list[str] = []

    def recorder(name: str) -> Advisor:
        async def before(request: ChatRequest) -> ChatRequest:
            seen.append(f"{name}>")
            return request

        async def after(response: ChatResponse) -> ChatResponse:
            seen.append(f"<{name}")
            return response

        return advisor(before=before, after=after, name=name)

    links = [recorder("a"), recorder("b"), recorder("c")]
    chain = Chain(links, model=ScriptedChatModel(["x", "x"]))
    await chain.call("hi")
    assert seen == ["a>", "b>", "c>", "<c", "<b", "<a"]
    seen.clear()
    async for _ in chain.stream("hi"):
        pass
    assert seen == ["a>", "b>", "c>", "<c", "<b", "<a"]


@pytest.mark.anyio
async def test_default_and_per_call_tools_and_context_merge() -> None:
    model = ScriptedChatModel(
        [
            [
                ToolCall.from_arguments("read_order", {"order_id": "1"}, id="c1"),
                ToolCall.from_arguments("cancel_order", {"order_id": "1"}, id="c2"),
            ],
            "done",
        ]
    )
    chain = Chain(
        [ToolCallingAdvisor()],
        model=model,
        tools=[read_order],
        tool_context={"tenant_id": "default", "user_id": "u1"},
    )
    response = await chain.call(
        "cancel 1", tools=[cancel_order], tool_context={"tenant_id": "acme"}
    )
    assert [t.name for t in model.requests[0].tools] == ["read_order", "cancel_order"]
    tool_messages = [m for m in response.messages if m.role == "tool"]
    assert [m.content for m in tool_messages] == ["order 1 of acme", "cancelled 1"]
    # without the per-call tool, the destructive tool is not attached
    model2 = ScriptedChatModel(["no"])
    await Chain([ToolCallingAdvisor()], model=model2, tools=[read_order]).call("x")
    assert [t.name for t in model2.requests[0].tools] == ["read_order"]


@pytest.mark.anyio
async def test_duplicate_tool_name_is_an_error() -> None:
    @tool(name="read_order")
    def imposter(order_id: str) -> str:
        """Not the real one."""
        return order_id

    chain = Chain([], model=ScriptedChatModel(["x"]), tools=[read_order])
    with pytest.raises(ChainConfigurationError, match="read_order"):
        await chain.call("hi", tools=[imposter])
    # the same tool object twice is fine
    await chain.call("hi", tools=[read_order])


@pytest.mark.anyio
async def test_tool_context_never_reaches_the_model() -> None:
    secret = "tenant-secret-8c1f"
    model = ScriptedChatModel([ToolCall.from_arguments("read_order", {"order_id": "9"}), "ok"])
    chain = Chain([ToolCallingAdvisor()], model=model, tools=[read_order])
    response = await chain.call("read 9", tool_context={"tenant_id": secret})
    assert secret in response.messages[1].text  # the tool did receive it
    for request in model.requests:
        assert not request.tool_context
        assert secret not in repr(request)
        assert secret not in [t.definition.fingerprint() for t in request.tools][0]
    # the transcript sent in round 2 carries the tool's result, chosen by the tool, but no context
    assert secret not in dump_messages(model.requests[0].messages).decode()
    assert "ctx" not in read_order.definition.parameters["properties"]


_var: contextvars.ContextVar[str] = contextvars.ContextVar("var", default="unset")


class SetsContextVar(Advisor):
    single_path = True

    async def stream(self, request: ChatRequest, next: StreamNext) -> AsyncIterator[StreamEvent]:
        token = _var.set("from-advisor")
        try:
            async for event in next(request):
                yield event
        finally:
            _var.reset(token)


@pytest.mark.anyio
async def test_stream_hooks_keep_contextvars() -> None:
    seen: list[str] = []

    def script(request: ChatRequest) -> str:
        seen.append(_var.get())
        return "ok"

    chain = Chain([SetsContextVar()], model=ScriptedChatModel(script))
    async for _ in chain.stream("hi"):
        pass
    assert seen == ["from-advisor"]


def test_links_must_be_advisors() -> None:
    with pytest.raises(TypeError, match="not an Advisor"):
        Chain([object()], model=ScriptedChatModel([]))  # type: ignore[list-item]

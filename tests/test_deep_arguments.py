"""Issue 15 item 5: arguments nested 10,000 deep (or too long) are an error result the model
reads, never a `RecursionError` that loses the turn: in the tool loop, the approval advisor,
the Anthropic request builder and stream reader, and the text tool-call parser."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from advisorchain import (
    AssistantMessage,
    Chain,
    ChatResponse,
    ResponseCompleted,
    ToolCall,
    ToolCallingAdvisor,
    ToolMessage,
    tool,
)
from advisorchain.advisors import ApprovalAdvisor, ApprovalRequest, Approve, CallbackApprover
from advisorchain.core.arguments import (
    MAX_ARGUMENT_CHARS,
    MAX_ARGUMENT_DEPTH,
    ArgumentsError,
    parse_arguments,
)
from advisorchain.core.text_tool_calls import parse_text_tool_calls
from advisorchain.providers import AnthropicChatModel, ScriptedChatModel, TextToolCallModel
from advisorchain.providers.anthropic import RAW_ARGUMENTS_KEY, wire_messages

DEEP = "[" * 10_000 + "]" * 10_000
DEEP_OBJECT = '{"text": ' + "[" * 10_000 + "]" * 10_000 + "}"


def nested(depth: int) -> str:
    """An object whose `text` argument sits `depth` levels deep, counting the object."""
    return '{"text": ' + "[" * (depth - 1) + "]" * (depth - 1) + "}"


def test_the_parser_bounds_depth_and_size() -> None:
    assert parse_arguments("") == {}
    assert parse_arguments(' {"a": [1, {"b": 2}]} ') == {"a": [1, {"b": 2}]}
    parse_arguments(nested(MAX_ARGUMENT_DEPTH))
    for text in (DEEP, DEEP_OBJECT, nested(MAX_ARGUMENT_DEPTH + 1)):
        with pytest.raises(ArgumentsError, match="too deeply nested"):
            parse_arguments(text)
    with pytest.raises(ArgumentsError, match="too long"):
        parse_arguments('{"text": "' + "x" * MAX_ARGUMENT_CHARS + '"}')
    with pytest.raises(ArgumentsError, match="not valid JSON"):
        parse_arguments("{nope")
    assert issubclass(ArgumentsError, ValueError)


def tools(ran: list[Any], *, approval: bool = False) -> list[Any]:
    @tool(requires_approval=approval)
    def echo(text: Any = None) -> str:
        """Echo the text."""
        ran.append(text)
        return "ok"

    return [echo]


async def run(chain: Chain, mode: str, tool_list: list[Any]) -> ChatResponse:
    if mode == "call":
        return await chain.call("go", tools=tool_list)
    events = [e async for e in chain.stream("go", tools=tool_list)]
    last = events[-1]
    assert isinstance(last, ResponseCompleted)
    return last.response


def results(response: ChatResponse) -> list[ToolMessage]:
    return [m for m in response.messages if isinstance(m, ToolMessage)]


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["call", "stream"])
@pytest.mark.parametrize("arguments", [DEEP, DEEP_OBJECT], ids=["array", "object"])
async def test_deep_arguments_are_an_error_result_in_the_tool_loop(
    mode: str, arguments: str
) -> None:
    ran: list[Any] = []
    model = ScriptedChatModel([[ToolCall(id="d", name="echo", arguments=arguments)], "done"])
    response = await run(Chain([ToolCallingAdvisor()], model=model), mode, tools(ran))
    assert response.text == "done"
    (result,) = results(response)
    assert result.is_error and "too deeply nested" in result.content
    assert ran == []
    assert len(result.content) < 500  # the model reads why, not its own 20,000 characters


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["call", "stream"])
async def test_deep_arguments_beside_an_approved_call(mode: str) -> None:
    ran: list[Any] = []
    asked: list[ApprovalRequest] = []

    def approve(request: ApprovalRequest) -> list[Approve]:
        asked.append(request)
        return [Approve() for _ in request.calls]

    calls = [
        ToolCall(id="ok", name="echo", arguments='{"text": "hi"}'),
        ToolCall(id="deep", name="echo", arguments=DEEP_OBJECT),
    ]
    chain = Chain(
        [ToolCallingAdvisor(), ApprovalAdvisor(CallbackApprover(approve))],
        model=ScriptedChatModel([calls, "done"]),
    )
    response = await run(chain, mode, tools(ran, approval=True))
    assert response.text == "done"
    assert ran == ["hi"]
    assert [c.call_id for r in asked for c in r.calls] == ["ok"]
    deep = {m.tool_call_id: m for m in results(response)}["deep"]
    assert deep.is_error and "too deeply nested" in deep.content


def test_the_anthropic_request_builder_sends_deep_arguments_as_raw_text() -> None:
    call = ToolCall(id="d", name="echo", arguments=DEEP)
    _, wire = wire_messages([AssistantMessage(tool_calls=(call,))])
    (block,) = wire[0]["content"]
    assert block["input"] == {RAW_ARGUMENTS_KEY: DEEP}


def anthropic_sse(partial_json: str) -> bytes:
    events: list[dict[str, Any]] = [
        {"type": "message_start", "message": {"id": "m", "usage": {"input_tokens": 1}}},
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": {"type": "tool_use", "id": "toolu_1", "name": "echo", "input": {}},
        },
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "input_json_delta", "partial_json": partial_json},
        },
        {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {}},
        {"type": "message_stop"},
    ]
    return b"".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events)


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["call", "stream"])
async def test_deep_arguments_through_anthropic(mode: str) -> None:
    sent: list[dict[str, Any]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        sent.append(body)
        if len(sent) > 1:
            done = {"content": [{"type": "text", "text": "done"}], "stop_reason": "end_turn"}
            if body.get("stream"):
                return httpx.Response(200, content=done_sse(), headers=SSE)
            return httpx.Response(200, json={"id": "m", "usage": {}, **done})
        if body.get("stream"):
            return httpx.Response(200, content=anthropic_sse(DEEP_OBJECT), headers=SSE)
        # a complete response cannot hold 10,000 levels (no JSON reader takes them), but
        # arguments written as a string can: the Anthropic builder then sends them back
        call = json.dumps({"name": "echo", "arguments": DEEP_OBJECT})
        text = f"<tool_call>{call}</tool_call>"
        content = [{"type": "text", "text": text}]
        return httpx.Response(200, json={"id": "m", "usage": {}, "content": content})

    ran: list[Any] = []
    async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as client:
        model = AnthropicChatModel("c", api_key="k", base_url="http://x", http_client=client)
        chain = Chain([ToolCallingAdvisor()], model=TextToolCallModel(model))
        response = await run(chain, mode, tools(ran))
    assert response.text == "done"
    assert ran == []
    second = sent[-1]["messages"]
    assert any(
        b.get("type") == "tool_result" and b["is_error"] for m in second for b in m["content"]
    )


SSE = {"content-type": "text/event-stream"}


def done_sse() -> bytes:
    events: list[dict[str, Any]] = [
        {"type": "message_start", "message": {"id": "m", "usage": {"input_tokens": 1}}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "text_delta", "text": "done"},
        },
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {}},
        {"type": "message_stop"},
    ]
    return b"".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events)


def test_the_text_parser_leaves_deep_json_as_text() -> None:
    text = "<tool_call>" + DEEP + "</tool_call>"
    parsed = parse_text_tool_calls(text, {"echo"})
    assert parsed.calls == ()
    inner = '<tool_call>{"name": "echo", "arguments": "' + DEEP + '"}</tool_call>'
    (call,) = parse_text_tool_calls(inner, {"echo"}).calls
    assert call.arguments == DEEP  # kept as written: the tool loop reports it


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["call", "stream"])
@pytest.mark.parametrize("status", [200, 400])
async def test_deep_json_from_the_provider_is_a_provider_error(mode: str, status: int) -> None:
    from advisorchain.providers import OpenAIChatModel, ProviderError

    def handler(request: httpx.Request) -> httpx.Response:
        if status == 200 and mode == "stream":
            return httpx.Response(200, content=f"data: {DEEP}\n\n".encode(), headers=SSE)
        return httpx.Response(status, content=DEEP.encode())

    async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as client:
        model = OpenAIChatModel("m", base_url="http://x", http_client=client)
        chain = Chain([ToolCallingAdvisor()], model=model)
        with pytest.raises(ProviderError):
            await run(chain, mode, [])

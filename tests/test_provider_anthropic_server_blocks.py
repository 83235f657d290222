"""Anthropic server tool blocks (`server_tool_use`, `tool_search_tool_result`): kept on the
assistant message and sent back unchanged, in their place, on the next round."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from advisorchain import AssistantMessage, Chain, ResponseCompleted, Tool, ToolCallingAdvisor
from advisorchain.advisors import ToolSearchAdvisor
from advisorchain.core.errors import StreamInterruptedError
from advisorchain.providers import AnthropicChatModel
from advisorchain.providers.anthropic import (
    MAX_SERVER_INPUT_CHARS,
    SERVER_BLOCKS_KEY,
    _StreamState,
    message_response,
    wire_messages,
)
from advisorchain.providers.sse import SSEDecoder

from provider_support import (
    FAST_RETRY,
    HTTPX_ABANDONED_GENERATORS,
    Recorder,
    cuts,
    fixture,
    fixture_json,
    sse_response,
)

pytestmark = HTTPX_ABANDONED_GENERATORS

MESSAGE = "anthropic_message_tool_search.json"
STREAM = "anthropic_stream_tool_search.sse"


def replay(chunks: list[bytes]) -> _StreamState:
    state, decoder = _StreamState(), SSEDecoder()
    for chunk in chunks:
        for event in decoder.feed(chunk):
            state.receive(event.data, event.event)
    for event in decoder.close():
        state.receive(event.data, event.event)
    return state


def sent_back(message: AssistantMessage) -> list[dict[str, Any]]:
    _, wire = wire_messages([message])
    (assistant,) = wire
    assert assistant["role"] == "assistant"
    content: list[dict[str, Any]] = assistant["content"]
    return content


def test_the_answer_keeps_the_server_blocks_and_sends_them_back_unchanged() -> None:
    recorded = fixture_json(MESSAGE)
    response = message_response(recorded)
    assert (
        response.text == "I'll search for a weather tool first.Found it — checking San Francisco…"
    )
    assert [c.name for c in response.tool_calls] == ["get_weather"]
    kept = response.message.provider_data["anthropic"][SERVER_BLOCKS_KEY]  # type: ignore[index]
    assert [k["block"]["type"] for k in kept] == ["server_tool_use", "tool_search_tool_result"]
    assert sent_back(response.message) == recorded["content"]  # block for block, in order


def test_the_stream_keeps_the_same_blocks_at_every_byte_boundary() -> None:
    expected = message_response(fixture_json(MESSAGE))
    data = fixture(STREAM)
    for chunks in cuts(data, steps=(1, 64)):
        response = replay(chunks).response()
        assert response == expected
    assert sent_back(expected.message) == fixture_json(MESSAGE)["content"]


def test_blocks_at_the_start_and_the_end_and_after_an_edit() -> None:
    blocks = fixture_json(MESSAGE)["content"]
    search, result, call = blocks[1], blocks[2], blocks[4]
    first = message_response({**fixture_json(MESSAGE), "content": [search, result, call]})
    assert sent_back(first.message) == [search, result, call]
    last = message_response(
        {**fixture_json(MESSAGE), "content": [{"type": "text", "text": "Hm."}, search, result]}
    )
    assert sent_back(last.message) == [{"type": "text", "text": "Hm."}, search, result]
    original = message_response(fixture_json(MESSAGE)).message
    edited = original.model_copy(update={"content": "Short."})  # an advisor rewrote the text
    assert sent_back(edited) == [{"type": "text", "text": "Short."}, search, result, call]


def test_a_server_input_is_bounded_and_must_be_json() -> None:
    start = {
        "type": "content_block_start",
        "index": 0,
        "content_block": {"type": "server_tool_use", "id": "srvtoolu_1", "name": "s", "input": {}},
    }
    state = _StreamState()
    state.receive(json.dumps(start))
    huge = {
        "type": "content_block_delta",
        "index": 0,
        "delta": {"type": "input_json_delta", "partial_json": "x" * (MAX_SERVER_INPUT_CHARS + 1)},
    }
    with pytest.raises(StreamInterruptedError, match="over"):
        state.receive(json.dumps(huge))
    state = _StreamState()
    state.receive(json.dumps(start))
    cut = {**huge, "delta": {"type": "input_json_delta", "partial_json": '{"query": "we'}}
    state.receive(json.dumps(cut))
    state.receive(json.dumps({"type": "message_delta", "delta": {"stop_reason": "end_turn"}}))
    with pytest.raises(StreamInterruptedError, match="invalid"):
        state.response()


def catalog(calls: list[dict[str, Any]]) -> list[Tool]:
    wire = json.loads(fixture("anthropic_tool_search_tools.json"))

    def handler(arguments: dict[str, Any], context: Any) -> str:
        calls.append(arguments)
        return "62°F, fog"

    return [Tool(t["name"], t["description"], t["input_schema"], handler) for t in wire[1:]]


def final_message() -> httpx.Response:
    return httpx.Response(
        200,
        json={
            "id": "msg_2",
            "type": "message",
            "role": "assistant",
            "model": "claude-opus-4-6",
            "content": [{"type": "text", "text": "It is 62°F and foggy."}],
            "stop_reason": "end_turn",
            "usage": {"input_tokens": 1200, "output_tokens": 12},
        },
    )


def final_stream() -> httpx.Response:
    events: list[dict[str, Any]] = [
        {"type": "message_start", "message": {"id": "msg_2", "usage": {"input_tokens": 9}}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "text_delta", "text": "It is 62°F and foggy."},
        },
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {}},
        {"type": "message_stop"},
    ]
    data = "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events)
    return sse_response(data.encode())


@pytest.mark.anyio
@pytest.mark.parametrize("stream", [False, True], ids=["call", "stream"])
async def test_the_next_round_sends_the_search_back_before_the_call(stream: bool) -> None:
    if stream:
        recorder = Recorder(sse_response(fixture(STREAM)), final_stream())
    else:
        recorder = Recorder(httpx.Response(200, json=fixture_json(MESSAGE)), final_message())
    model = AnthropicChatModel(
        "claude-opus-4-6", api_key="k", http_client=recorder.client(), retry_policy=FAST_RETRY
    )
    calls: list[dict[str, Any]] = []
    chain = Chain(
        [ToolCallingAdvisor(), ToolSearchAdvisor(native="bm25", min_tools=2)],
        model=model,
        tools=catalog(calls),
    )
    if stream:
        events = [e async for e in chain.stream("What is the weather in San Francisco?")]
        assert isinstance(events[-1], ResponseCompleted)
        response = events[-1].response
    else:
        response = await chain.call("What is the weather in San Francisco?")
    assert response.text == "It is 62°F and foggy."
    assert calls == [{"location": "San Francisco", "unit": "fahrenheit"}]
    second = recorder.bodies[1]["messages"]
    assert [m["role"] for m in second] == ["user", "assistant", "user"]
    content = [{k: v for k, v in b.items() if k != "cache_control"} for b in second[1]["content"]]
    assert content == fixture_json(MESSAGE)["content"]
    assert second[2]["content"][0]["type"] == "tool_result"

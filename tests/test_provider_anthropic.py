from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from advisorchain import (
    AssistantMessage,
    Chain,
    ChatOptions,
    ChatRequest,
    ResponseCompleted,
    StreamInterruptedError,
    SystemMessage,
    TextDelta,
    ToolCall,
    ToolCallDelta,
    ToolCallingAdvisor,
    ToolMessage,
    Usage,
    UserMessage,
)
from advisorchain.providers import (
    AnthropicChatModel,
    BadRequestError,
    InvalidResponseError,
    ProviderError,
    ProviderUnavailableError,
)

from provider_support import (
    FAST_RETRY,
    HTTPX_ABANDONED_GENERATORS,
    Recorder,
    fixture,
    fixture_json,
    get_time,
    get_weather,
    sse_response,
)

pytestmark = HTTPX_ABANDONED_GENERATORS

KEY = "sk-ant-test-SECRET-0123456789"


def message(
    content: list[dict[str, Any]] | None = None,
    *,
    stop_reason: str | None = "end_turn",
    usage: dict[str, Any] | None = None,
) -> httpx.Response:
    return httpx.Response(
        200,
        json={
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "claude-test",
            "content": content if content is not None else [{"type": "text", "text": "Hello!"}],
            "stop_reason": stop_reason,
            "stop_sequence": None,
            "usage": usage or {"input_tokens": 5, "output_tokens": 2},
        },
    )


def model_for(recorder: Recorder, **kwargs: Any) -> AnthropicChatModel:
    """The model under test, without prompt caching: its marks are tested on their own
    (test_provider_anthropic_cache.py), the bodies here stay as the API's reference shows."""
    kwargs.setdefault("api_key", KEY)
    kwargs.setdefault("prompt_cache", False)
    return AnthropicChatModel(
        "claude-test", http_client=recorder.client(), retry_policy=FAST_RETRY, **kwargs
    )


def request(*messages: Any, tools: tuple[Any, ...] = (), **options: Any) -> ChatRequest:
    return ChatRequest(
        messages=messages or (UserMessage(content="Hi"),),
        options=ChatOptions(**options),
        tools=tools,
    )


async def collect(model: AnthropicChatModel, req: ChatRequest) -> list[Any]:
    return [event async for event in model.stream(req)]


def event(data: dict[str, Any]) -> bytes:
    return f"event: {data['type']}\ndata: {json.dumps(data)}\n\n".encode()


# --- request bodies --------------------------------------------------------------------


@pytest.mark.anyio
async def test_request_body_field_by_field() -> None:
    recorder = Recorder(message())
    calls = (
        ToolCall(id="toolu_1", name="get_weather", arguments='{"city": "Paris"}'),
        ToolCall(id="toolu_2", name="get_time", arguments=""),
    )
    req = request(
        SystemMessage(content="Be brief."),
        UserMessage(content="Weather and time in Paris?"),
        AssistantMessage(content="Let me check.", tool_calls=calls),
        ToolMessage(tool_call_id="toolu_1", name="get_weather", content="sunny"),
        ToolMessage(tool_call_id="toolu_2", name="get_time", content="boom", is_error=True),
        UserMessage(content="And tomorrow?"),
        SystemMessage(content="Answer in French."),
        AssistantMessage(content="Demain aussi."),
        tools=(get_weather,),
        temperature=0.3,
        top_p=0.8,
        stop=("END",),
    )
    await model_for(recorder).call(req)
    (sent,) = recorder.requests
    assert str(sent.url) == "https://api.anthropic.com/v1/messages"
    assert sent.headers["x-api-key"] == KEY
    assert sent.headers["anthropic-version"] == "2023-06-01"
    assert "authorization" not in sent.headers
    body = json.loads(sent.content)
    assert body["model"] == "claude-test"
    assert body["max_tokens"] == 4096
    assert body["system"] == "Be brief.\n\nAnswer in French."
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "Weather and time in Paris?"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Let me check."},
                {
                    "type": "tool_use",
                    "id": "toolu_1",
                    "name": "get_weather",
                    "input": {"city": "Paris"},
                },
                {"type": "tool_use", "id": "toolu_2", "name": "get_time", "input": {}},
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_1",
                    "content": "sunny",
                    "is_error": False,
                },
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_2",
                    "content": "boom",
                    "is_error": True,
                },
                {"type": "text", "text": "And tomorrow?"},
            ],
        },
        {"role": "assistant", "content": [{"type": "text", "text": "Demain aussi."}]},
    ]
    assert body["tools"] == [
        {
            "name": "get_weather",
            "description": "The weather in a city.",
            "input_schema": dict(get_weather.definition.parameters),
        }
    ]
    assert body["temperature"] == 0.3
    assert body["top_p"] == 0.8
    assert body["stop_sequences"] == ["END"]
    for absent in ("tool_choice", "stream", "stop"):
        assert absent not in body


@pytest.mark.anyio
async def test_malformed_arguments_are_sent_raw_not_dropped() -> None:
    recorder = Recorder(message())
    bad = (
        ToolCall(id="t1", name="f", arguments='{"city": "Par'),
        ToolCall(id="t2", name="f", arguments="[1, 2]"),
    )
    req = request(UserMessage(content="x"), AssistantMessage(tool_calls=bad))
    await model_for(recorder).call(req)
    blocks = recorder.bodies[0]["messages"][1]["content"]
    assert [b["input"] for b in blocks] == [
        {"_raw_arguments": '{"city": "Par'},
        {"_raw_arguments": "[1, 2]"},
    ]


@pytest.mark.anyio
async def test_empty_assistant_message_and_empty_text_are_left_out() -> None:
    recorder = Recorder(message())
    req = request(UserMessage(content="a"), AssistantMessage(content=""), UserMessage(content="b"))
    await model_for(recorder).call(req)
    assert recorder.bodies[0]["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}
    ]


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("choice", "parallel", "wire"),
    [
        ("auto", None, {"type": "auto"}),
        ("required", None, {"type": "any"}),
        ("none", None, {"type": "none"}),
        ("get_weather", None, {"type": "tool", "name": "get_weather"}),
        (None, False, {"type": "auto", "disable_parallel_tool_use": True}),
        ("required", False, {"type": "any", "disable_parallel_tool_use": True}),
        (
            "get_weather",
            False,
            {"type": "tool", "name": "get_weather", "disable_parallel_tool_use": True},
        ),
        (None, True, None),
    ],
)
async def test_tool_choice(choice: str | None, parallel: bool | None, wire: Any) -> None:
    recorder = Recorder(message())
    req = request(tools=(get_weather,), tool_choice=choice, parallel_tool_calls=parallel)
    await model_for(recorder).call(req)
    assert recorder.bodies[0].get("tool_choice") == wire


@pytest.mark.anyio
async def test_max_tokens_extra_and_headers() -> None:
    recorder = Recorder(message(), message())
    model = model_for(recorder, max_tokens=1000, headers={"anthropic-beta": "tools-2024"})
    await model.call(request())
    assert recorder.bodies[0]["max_tokens"] == 1000
    assert recorder.requests[0].headers["anthropic-beta"] == "tools-2024"
    extra = {"metadata": {"user_id": "u1"}, "top_k": 5}
    await model.call(request(max_tokens=10, extra=extra, model="claude-other"))
    body = recorder.bodies[1]
    assert (body["max_tokens"], body["model"]) == (10, "claude-other")
    assert body["metadata"] == {"user_id": "u1"} and body["top_k"] == 5


# --- responses -------------------------------------------------------------------------


EXPECTED_MESSAGE = AssistantMessage(
    content="Okay, checking Zürich 🌦 and the time…",
    tool_calls=(
        ToolCall(
            id="toolu_01T1x1fJ34qAmk2tNTrN7Up6", name="get_weather", arguments='{"city":"Zürich"}'
        ),
        ToolCall(
            id="toolu_01VgqM8ZqR8i6fFJsNyx2W8k", name="get_time", arguments='{"tz":"Europe/Zurich"}'
        ),
    ),
)


@pytest.mark.anyio
async def test_call_parses_text_tool_use_usage_id_and_model() -> None:
    recorder = Recorder(httpx.Response(200, json=fixture_json("anthropic_message_tool_use.json")))
    response = await model_for(recorder).call(request())
    assert response.message == EXPECTED_MESSAGE
    assert response.finish_reason == "tool_calls"
    # input counts fresh + cache writes + cache reads; cache reads are the cached tokens
    assert response.usage == Usage(
        input_tokens=572, output_tokens=89, cached_tokens=100, requests=1
    )
    assert response.id == "msg_01XFDUDYJgAACzvnptvVoYEL"
    assert response.model == "claude-sonnet-4-5-20250929"


@pytest.mark.anyio
async def test_stream_yields_deltas_then_the_same_response_as_call() -> None:
    recorder = Recorder(
        httpx.Response(200, json=fixture_json("anthropic_message_tool_use.json")),
        sse_response(fixture("anthropic_stream_tool_use.sse")),
    )
    model = model_for(recorder)
    called = await model.call(request())
    events = await collect(model, request())
    assert events[:-1] == [
        TextDelta("Okay, checking Zürich "),
        TextDelta("🌦 and the time…"),
        ToolCallDelta(0, "toolu_01T1x1fJ34qAmk2tNTrN7Up6", "get_weather", ""),
        ToolCallDelta(0, None, None, '{"city": "Zür'),
        ToolCallDelta(0, None, None, 'ich"}'),
        ToolCallDelta(1, "toolu_01VgqM8ZqR8i6fFJsNyx2W8k", "get_time", ""),
        ToolCallDelta(1, None, None, '{"tz": "Europe/Zurich"}'),
    ]
    assert isinstance(events[-1], ResponseCompleted)
    assert events[-1].response == called


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("wire", "core"),
    [
        ("end_turn", "stop"),
        ("stop_sequence", "stop"),
        ("tool_use", "tool_calls"),
        ("max_tokens", "length"),
        ("refusal", "content_filter"),
        (None, "stop"),
        ("brand_new", "brand_new"),
    ],
)
async def test_finish_reasons(wire: str | None, core: str) -> None:
    recorder = Recorder(message(stop_reason=wire))
    assert (await model_for(recorder).call(request())).finish_reason == core


@pytest.mark.anyio
async def test_unknown_blocks_and_events_are_ignored() -> None:
    content = [
        {"type": "brand_new_block", "payload": "hmm"},
        {"type": "text", "text": "Hi"},
    ]
    recorder = Recorder(
        message(content),
        sse_response(
            [
                event(
                    {"type": "message_start", "message": {"id": "m", "usage": {"input_tokens": 3}}}
                ),
                event(
                    {
                        "type": "content_block_start",
                        "index": 0,
                        "content_block": {"type": "brand_new_block"},
                    }
                ),
                event(
                    {
                        "type": "content_block_delta",
                        "index": 0,
                        "delta": {"type": "brand_new_delta", "payload": "x"},
                    }
                ),
                event({"type": "brand_new_event"}),
                event(
                    {
                        "type": "content_block_start",
                        "index": 1,
                        "content_block": {"type": "text", "text": ""},
                    }
                ),
                event(
                    {
                        "type": "content_block_delta",
                        "index": 1,
                        "delta": {"type": "text_delta", "text": "Hi"},
                    }
                ),
                event(
                    {
                        "type": "message_delta",
                        "delta": {"stop_reason": "end_turn"},
                        "usage": {"output_tokens": 4},
                    }
                ),
                event({"type": "message_stop"}),
            ]
        ),
    )
    model = model_for(recorder)
    assert (await model.call(request())).text == "Hi"
    events = await collect(model, request())
    assert events[:-1] == [TextDelta("Hi")]
    assert events[-1].response.usage == Usage(input_tokens=3, output_tokens=4, requests=1)


# --- failures --------------------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize(
    "payload", [b"<html>", b'{"content": 3}', b'{"content": [{"type": "tool_use"}]}']
)
async def test_unexpected_response_is_a_typed_error(payload: bytes) -> None:
    recorder = Recorder(httpx.Response(200, content=payload))
    with pytest.raises(InvalidResponseError, match="anthropic"):
        await model_for(recorder).call(request())


START = event({"type": "message_start", "message": {"id": "m", "model": "c", "usage": {}}})
TEXT = event(
    {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hel"}}
)


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("tail", "error", "match"),
    [
        (b"event: content_block_delta\ndata: {oops\n\n", StreamInterruptedError, "malformed JSON"),
        (b"", StreamInterruptedError, "ended before its final event"),
        (
            event(
                {
                    "type": "content_block_delta",
                    "index": 9,
                    "delta": {"type": "input_json_delta", "partial_json": "{"},
                }
            ),
            StreamInterruptedError,
            "unexpected stream event",
        ),
        (
            event(
                {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
            ),
            ProviderUnavailableError,
            "Overloaded",
        ),
        (
            event({"type": "error", "error": {"type": "mystery", "message": "odd"}}),
            ProviderError,
            "odd",
        ),
    ],
)
async def test_broken_stream_raises_after_the_text_already_yielded(
    tail: bytes, error: type[Exception], match: str
) -> None:
    recorder = Recorder(sse_response([START, TEXT, event({"type": "ping"}), tail]))
    seen: list[str] = []
    with pytest.raises(error, match=match):
        async for item in model_for(recorder).stream(request()):
            if isinstance(item, TextDelta):
                seen.append(item.text)
    assert seen == ["Hel"]
    assert len(recorder.requests) == 1


# --- API keys --------------------------------------------------------------------------


@pytest.mark.anyio
async def test_key_and_base_url_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://localhost:4000/")
    recorder = Recorder(message())
    model = AnthropicChatModel("c", http_client=recorder.client())
    await model.call(request())
    assert str(recorder.requests[0].url) == "http://localhost:4000/v1/messages"
    assert recorder.requests[0].headers["x-api-key"] == KEY


# --- end to end ------------------------------------------------------------------------


def _round_one(req: httpx.Request) -> httpx.Response:
    if json.loads(req.content).get("stream"):
        return sse_response(fixture("anthropic_stream_tool_use.sse"))
    return httpx.Response(200, json=fixture_json("anthropic_message_tool_use.json"))


def _round_two(req: httpx.Request) -> httpx.Response:
    if json.loads(req.content).get("stream"):
        return sse_response(
            [
                START,
                event(
                    {
                        "type": "content_block_start",
                        "index": 0,
                        "content_block": {"type": "text", "text": ""},
                    }
                ),
                event(
                    {
                        "type": "content_block_delta",
                        "index": 0,
                        "delta": {"type": "text_delta", "text": "Sunny, noon."},
                    }
                ),
                event({"type": "content_block_stop", "index": 0}),
                event(
                    {
                        "type": "message_delta",
                        "delta": {"stop_reason": "end_turn"},
                        "usage": {"output_tokens": 5},
                    }
                ),
                event({"type": "message_stop"}),
            ]
        )
    return message([{"type": "text", "text": "Sunny, noon."}])


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["call", "stream"])
async def test_chain_runs_a_two_round_tool_conversation(mode: str) -> None:
    recorder = Recorder(_round_one, _round_two)
    chain = Chain([ToolCallingAdvisor()], model=model_for(recorder), tools=[get_weather, get_time])
    if mode == "call":
        response = await chain.call("Weather and time in Zürich?")
    else:
        events = [e async for e in chain.stream("Weather and time in Zürich?")]
        final = events[-1]
        assert isinstance(final, ResponseCompleted)
        response = final.response
    assert response.text == "Sunny, noon."
    first, second = recorder.bodies
    assert [t["name"] for t in first["tools"]] == ["get_weather", "get_time"]
    assert second["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "Weather and time in Zürich?"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Okay, checking Zürich 🌦 and the time…"},
                {
                    "type": "tool_use",
                    "id": "toolu_01T1x1fJ34qAmk2tNTrN7Up6",
                    "name": "get_weather",
                    "input": {"city": "Zürich"},
                },
                {
                    "type": "tool_use",
                    "id": "toolu_01VgqM8ZqR8i6fFJsNyx2W8k",
                    "name": "get_time",
                    "input": {"tz": "Europe/Zurich"},
                },
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_01T1x1fJ34qAmk2tNTrN7Up6",
                    "content": "sunny in Zürich",
                    "is_error": False,
                },
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_01VgqM8ZqR8i6fFJsNyx2W8k",
                    "content": "12:00 in Europe/Zurich",
                    "is_error": False,
                },
            ],
        },
    ]
    assert response.usage.requests == 2


@pytest.mark.anyio
async def test_tool_use_with_its_input_in_the_start_event() -> None:
    block = {"type": "tool_use", "id": "toolu_9", "name": "f", "input": {"a": 1}}
    recorder = Recorder(
        sse_response(
            [
                START,
                event({"type": "content_block_start", "index": 0, "content_block": block}),
                event({"type": "content_block_stop", "index": 0}),
                event({"type": "message_delta", "delta": {"stop_reason": "tool_use"}}),
                event({"type": "message_stop"}),
            ]
        )
    )
    events = await collect(model_for(recorder), request())
    assert events[-1].response.message.tool_calls == (
        ToolCall(id="toolu_9", name="f", arguments='{"a":1}'),
    )


@pytest.mark.anyio
async def test_error_body_with_status_200_is_a_typed_error() -> None:
    body = {"type": "error", "error": {"type": "invalid_request_error", "message": "bad"}}
    recorder = Recorder(httpx.Response(200, json=body))
    with pytest.raises(BadRequestError, match="bad") as caught:
        await model_for(recorder).call(request())
    assert not isinstance(caught.value, InvalidResponseError)

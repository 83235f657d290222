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
    AuthenticationError,
    BadRequestError,
    InvalidResponseError,
    OpenAIChatModel,
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

KEY = "sk-test-SECRET-0123456789abcdef"


def completion(
    content: str | None = "Hello!",
    *,
    tool_calls: list[dict[str, Any]] | None = None,
    finish_reason: str | None = "stop",
    usage: dict[str, Any] | None = None,
) -> httpx.Response:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = tool_calls
    return httpx.Response(
        200,
        json={
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "model": "gpt-test",
            "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
            "usage": usage or {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7},
        },
    )


def model_for(recorder: Recorder, **kwargs: Any) -> OpenAIChatModel:
    kwargs.setdefault("api_key", KEY)
    return OpenAIChatModel(
        "gpt-test", http_client=recorder.client(), retry_policy=FAST_RETRY, **kwargs
    )


def request(*messages: Any, **options: Any) -> ChatRequest:
    return ChatRequest(
        messages=messages or (UserMessage(content="Hi"),), options=ChatOptions(**options)
    )


async def collect(model: OpenAIChatModel, req: ChatRequest) -> list[Any]:
    return [event async for event in model.stream(req)]


# --- request bodies --------------------------------------------------------------------


@pytest.mark.anyio
async def test_request_body_messages_and_tools_field_by_field() -> None:
    recorder = Recorder(completion())
    model = model_for(recorder)
    call = ToolCall(id="call_1", name="get_weather", arguments='{"city":"Paris"}')
    req = ChatRequest(
        messages=(
            SystemMessage(content="Be brief."),
            UserMessage(content="Weather in Paris?"),
            AssistantMessage(tool_calls=(call,)),
            ToolMessage(tool_call_id="call_1", name="get_weather", content="sunny"),
            ToolMessage(tool_call_id="call_2", name="x", content="Error: boom", is_error=True),
            AssistantMessage(content="It is sunny."),
        ),
        tools=(get_weather,),
        options=ChatOptions(temperature=0.2, top_p=0.9, max_tokens=50, stop=("END",)),
    )
    await model.call(req)
    (sent,) = recorder.requests
    assert sent.method == "POST"
    assert str(sent.url) == "https://api.openai.com/v1/chat/completions"
    assert sent.headers["authorization"] == f"Bearer {KEY}"
    assert sent.headers["content-type"] == "application/json"
    body = json.loads(sent.content)
    assert body["model"] == "gpt-test"
    assert body["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Weather in Paris?"},
        {
            "role": "assistant",
            "content": "",  # never null: llama.cpp rejects it
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
        {"role": "tool", "tool_call_id": "call_2", "content": "Error: boom"},
        {"role": "assistant", "content": "It is sunny."},
    ]
    assert body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "The weather in a city.",
                "parameters": dict(get_weather.definition.parameters),
            },
        }
    ]
    assert body["temperature"] == 0.2
    assert body["top_p"] == 0.9
    assert body["max_completion_tokens"] == 50  # the official API's field
    assert "max_tokens" not in body
    assert body["stop"] == ["END"]
    assert body["tool_choice"] == "auto"  # spelled out with tools: some servers need it
    for absent in ("parallel_tool_calls", "stream", "stream_options"):
        assert absent not in body


@pytest.mark.anyio
async def test_unset_options_are_left_out() -> None:
    recorder = Recorder(completion())
    await model_for(recorder).call(request())
    assert recorder.bodies[0] == {
        "model": "gpt-test",
        "messages": [{"role": "user", "content": "Hi"}],
    }


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("choice", "wire"),
    [
        ("auto", "auto"),
        ("none", "none"),
        ("required", "required"),
        ("get_weather", {"type": "function", "function": {"name": "get_weather"}}),
    ],
)
async def test_tool_choice(choice: str, wire: Any) -> None:
    recorder = Recorder(completion())
    req = request(tool_choice=choice, parallel_tool_calls=False).with_tools((get_weather,))
    await model_for(recorder).call(req)
    assert recorder.bodies[0]["tool_choice"] == wire
    assert recorder.bodies[0]["parallel_tool_calls"] is False


@pytest.mark.anyio
@pytest.mark.parametrize("stream", [False, True])
async def test_tools_without_a_choice_send_auto_on_both_paths(stream: bool) -> None:
    reply = sse_response(fixture("openai_stream_tool_calls.sse")) if stream else completion()
    recorder = Recorder(reply)
    model = model_for(recorder)
    req = request().with_tools((get_weather,))
    if stream:
        async for _ in model.stream(req):
            pass
    else:
        await model.call(req)
    assert recorder.bodies[0]["tool_choice"] == "auto"
    assert "parallel_tool_calls" not in recorder.bodies[0]


@pytest.mark.anyio
async def test_tool_choice_is_not_sent_without_tools() -> None:
    recorder = Recorder(completion())
    await model_for(recorder).call(request(tool_choice="required", parallel_tool_calls=True))
    assert "tool_choice" not in recorder.bodies[0]
    assert "parallel_tool_calls" not in recorder.bodies[0]


@pytest.mark.anyio
async def test_extra_options_pass_through_and_win() -> None:
    recorder = Recorder(completion())
    extra = {"seed": 7, "response_format": {"type": "json_object"}, "temperature": 1.5}
    await model_for(recorder).call(request(temperature=0.1, extra=extra, model="gpt-other"))
    body = recorder.bodies[0]
    assert body["seed"] == 7
    assert body["response_format"] == {"type": "json_object"}
    assert body["temperature"] == 1.5
    assert body["model"] == "gpt-other"


@pytest.mark.anyio
async def test_custom_server_gets_max_tokens_and_no_key() -> None:
    recorder = Recorder(completion(), completion())
    model = model_for(recorder, api_key=None, base_url="http://localhost:8080/v1/")
    await model.call(request(max_tokens=10))
    sent = recorder.requests[0]
    assert str(sent.url) == "http://localhost:8080/v1/chat/completions"
    assert "authorization" not in sent.headers
    assert recorder.bodies[0]["max_tokens"] == 10
    assert "max_completion_tokens" not in recorder.bodies[0]
    custom = model_for(
        recorder, base_url="https://api.example.com/v1", max_tokens_param="max_completion_tokens"
    )
    await custom.call(request(max_tokens=10))
    assert recorder.bodies[1]["max_completion_tokens"] == 10


@pytest.mark.anyio
async def test_streaming_body_asks_for_usage_and_extra_headers_are_sent() -> None:
    recorder = Recorder(sse_response(fixture("openai_stream_tool_calls.sse")))
    model = model_for(recorder, headers={"X-Title": "advisorchain"})
    await collect(model, request())
    assert recorder.bodies[0]["stream"] is True
    assert recorder.bodies[0]["stream_options"] == {"include_usage": True}
    assert recorder.requests[0].headers["x-title"] == "advisorchain"
    recorder.replies.append(sse_response(fixture("openai_stream_tool_calls.sse")))
    await collect(model_for(recorder, stream_usage=False), request())
    assert "stream_options" not in recorder.bodies[1]


# --- responses -------------------------------------------------------------------------


EXPECTED_CALLS = (
    ToolCall(id="call_DdmO9pD3xa9XTPNJ32zg2hcA", name="get_weather", arguments='{"city":"Zürich"}'),
    ToolCall(
        id="call_ABtPhwHg1o0JRy8MeMl2p1xQ", name="get_time", arguments='{"tz":"Europe/Zurich"}'
    ),
)


@pytest.mark.anyio
async def test_call_parses_text_tool_calls_usage_id_and_model() -> None:
    recorder = Recorder(httpx.Response(200, json=fixture_json("openai_completion_tool_calls.json")))
    response = await model_for(recorder).call(request())
    assert response.message == AssistantMessage(
        content="Checking Zürich 🌦 and the time…", tool_calls=EXPECTED_CALLS
    )
    assert response.finish_reason == "tool_calls"
    assert response.usage == Usage(input_tokens=82, output_tokens=41, cached_tokens=64, requests=1)
    assert response.id == "chatcmpl-AyPNinnUqUDYo9SAdA52NobMflmj2"
    assert response.model == "gpt-4.1-mini-2025-04-14"


@pytest.mark.anyio
async def test_stream_yields_deltas_then_the_same_response_as_call() -> None:
    recorder = Recorder(
        httpx.Response(200, json=fixture_json("openai_completion_tool_calls.json")),
        sse_response(fixture("openai_stream_tool_calls.sse")),
    )
    model = model_for(recorder)
    called = await model.call(request())
    events = await collect(model, request())
    assert [e for e in events if isinstance(e, TextDelta)] == [
        TextDelta("Checking Zürich "),
        TextDelta("🌦 and the time…"),
    ]
    assert [e for e in events if isinstance(e, ToolCallDelta)] == [
        ToolCallDelta(0, "call_DdmO9pD3xa9XTPNJ32zg2hcA", "get_weather", ""),
        ToolCallDelta(0, None, None, '{"ci'),
        ToolCallDelta(0, None, None, 'ty":"Zürich"}'),
        ToolCallDelta(1, "call_ABtPhwHg1o0JRy8MeMl2p1xQ", "get_time", ""),
        ToolCallDelta(1, None, None, '{"tz":"Europe/Zurich"}'),
    ]
    assert isinstance(events[-1], ResponseCompleted)
    assert sum(isinstance(e, ResponseCompleted) for e in events) == 1
    assert events[-1].response == called


@pytest.mark.anyio
async def test_repeated_id_and_name_in_every_tool_chunk_make_one_call() -> None:
    recorder = Recorder(sse_response(fixture("openai_stream_repeated_id_name.sse")))
    events = await collect(model_for(recorder, base_url="http://127.0.0.1:8080/v1"), request())
    response = events[-1].response
    assert response.message.tool_calls == (
        ToolCall(id="call_rep1", name="get_weather", arguments='{"city":"Paris"}'),
    )
    assert response.message.content is None
    assert response.usage == Usage(input_tokens=30, output_tokens=12, requests=1)


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("wire", "has_calls", "core"),
    [
        ("stop", False, "stop"),
        ("length", False, "length"),
        ("content_filter", False, "content_filter"),
        ("tool_calls", True, "tool_calls"),
        ("function_call", True, "tool_calls"),
        ("stop", True, "tool_calls"),  # Ollama reports "stop" with tool calls
        (None, False, "stop"),
        ("something_new", False, "something_new"),
    ],
)
async def test_finish_reasons(wire: str | None, has_calls: bool, core: str) -> None:
    calls = [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]
    recorder = Recorder(completion(tool_calls=calls if has_calls else None, finish_reason=wire))
    assert (await model_for(recorder).call(request())).finish_reason == core


@pytest.mark.anyio
async def test_refusal_becomes_the_text() -> None:
    payload = {
        "choices": [{"message": {"role": "assistant", "content": None, "refusal": "I can't help."}}]
    }
    recorder = Recorder(httpx.Response(200, json=payload))
    response = await model_for(recorder).call(request())
    assert response.text == "I can't help."
    assert response.finish_reason == "content_filter"
    assert response.usage == Usage(requests=1)


# --- failures --------------------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize(
    "payload",
    [
        b"not json",
        b"[1, 2]",
        b'{"choices": []}',
        b'{"choices": [{"message": {"tool_calls": [{}]}}]}',
    ],
)
async def test_unexpected_response_is_a_typed_error(payload: bytes) -> None:
    recorder = Recorder(httpx.Response(200, content=payload, headers={"x-request-id": "req_9"}))
    with pytest.raises(InvalidResponseError, match="openai"):
        await model_for(recorder).call(request())


@pytest.mark.anyio
async def test_retry_then_success_and_should_retry_header() -> None:
    recorder = Recorder(httpx.Response(503), httpx.Response(429), completion("ok"))
    assert (await model_for(recorder).call(request())).text == "ok"
    assert len(recorder.requests) == 3
    no_retry = Recorder(httpx.Response(503, headers={"x-should-retry": "false"}))
    with pytest.raises(ProviderUnavailableError):
        await model_for(no_retry).call(request())
    assert len(no_retry.requests) == 1
    retry = Recorder(httpx.Response(400, headers={"x-should-retry": "true"}), completion("ok"))
    assert (await model_for(retry).call(request())).text == "ok"


@pytest.mark.anyio
async def test_stream_errors_before_output_are_retried() -> None:
    recorder = Recorder(
        httpx.Response(500), sse_response(fixture("openai_stream_repeated_id_name.sse"))
    )
    events = await collect(model_for(recorder), request())
    assert isinstance(events[-1], ResponseCompleted)
    assert len(recorder.requests) == 2


def _chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
    data = {"id": "c", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    return f"data: {json.dumps(data)}\n\n".encode()


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("tail", "match"),
    [
        (b"data: {not json\n\n", "malformed JSON"),
        (b"", "ended before its final event"),
        (b'data: {"choices": [{"delta": {"tool_calls": 5}}]}\n\n', "unexpected stream chunk"),
    ],
)
async def test_broken_stream_raises_after_the_text_already_yielded(tail: bytes, match: str) -> None:
    recorder = Recorder(sse_response([_chunk({"content": "Hel"}), _chunk({"content": "lo"}), tail]))
    seen: list[str] = []
    with pytest.raises(StreamInterruptedError, match=match):
        async for event in model_for(recorder).stream(request()):
            if isinstance(event, TextDelta):
                seen.append(event.text)
    assert seen == ["Hel", "lo"]
    assert len(recorder.requests) == 1  # never retried once output was yielded


@pytest.mark.anyio
async def test_error_event_in_stream_is_a_typed_error() -> None:
    error = b'data: {"error": {"message": "context too long", "code": 400}}\n\n'
    recorder = Recorder(sse_response([_chunk({"content": "Hi"}), error]))
    with pytest.raises(BadRequestError, match="context too long"):
        await collect(model_for(recorder), request())
    recorder = Recorder(sse_response([b'data: {"error": "server exploded"}\n\n']))
    with pytest.raises(ProviderError, match="server exploded"):
        await collect(model_for(recorder), request())


@pytest.mark.anyio
async def test_finish_reason_without_done_is_complete() -> None:
    recorder = Recorder(sse_response([_chunk({"content": "Hi"}), _chunk({}, "stop")]))
    events = await collect(model_for(recorder), request())
    assert events[-1].response.text == "Hi"


# --- API keys --------------------------------------------------------------------------


@pytest.mark.anyio
async def test_key_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("OPENAI_BASE_URL", "http://localhost:9999/v1")
    recorder = Recorder(completion())
    await OpenAIChatModel("m", http_client=recorder.client()).call(request())
    assert str(recorder.requests[0].url) == "http://localhost:9999/v1/chat/completions"
    assert recorder.requests[0].headers["authorization"] == f"Bearer {KEY}"


@pytest.mark.anyio
async def test_explicit_base_url_never_gets_the_openai_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("DEEPSEEK_API_KEY", "sk-deepseek")
    recorder = Recorder(completion(), completion())
    client = recorder.client()
    await OpenAIChatModel("m", base_url="http://localhost:1/v1", http_client=client).call(request())
    assert "authorization" not in recorder.requests[0].headers
    named = OpenAIChatModel(
        "m", base_url="http://localhost:1/v1", api_key_env="DEEPSEEK_API_KEY", http_client=client
    )
    await named.call(request())
    assert recorder.requests[1].headers["authorization"] == "Bearer sk-deepseek"


# --- lifecycle -------------------------------------------------------------------------


@pytest.mark.anyio
async def test_injected_client_stays_open_and_own_client_is_closed() -> None:
    recorder = Recorder(completion())
    client = recorder.client()
    async with OpenAIChatModel("m", api_key=KEY, http_client=client) as model:
        await model.call(request())
    assert not client.is_closed
    own = OpenAIChatModel("m", api_key=KEY)
    created = own._http.client
    await own.aclose()
    assert created.is_closed
    assert own.provider_name == "openai" and own.model_name == "m"


# --- end to end ------------------------------------------------------------------------


def _round_one(request: httpx.Request) -> httpx.Response:
    body = json.loads(request.content)
    if body.get("stream"):
        return sse_response(fixture("openai_stream_tool_calls.sse"))
    return httpx.Response(200, json=fixture_json("openai_completion_tool_calls.json"))


def _round_two(request: httpx.Request) -> httpx.Response:
    body = json.loads(request.content)
    if body.get("stream"):
        return sse_response([_chunk({"content": "Sunny, "}), _chunk({"content": "noon."}, "stop")])
    return completion("Sunny, noon.")


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["call", "stream"])
async def test_chain_runs_a_two_round_tool_conversation(mode: str) -> None:
    recorder = Recorder(_round_one, _round_two)
    chain = Chain([ToolCallingAdvisor()], model=model_for(recorder), tools=[get_weather, get_time])
    if mode == "call":
        response = await chain.call("Weather and time in Zürich?")
    else:
        events = [e async for e in chain.stream("Weather and time in Zürich?")]
        assert "".join(e.text for e in events if isinstance(e, TextDelta)).endswith("Sunny, noon.")
        assert isinstance(events[-1], ResponseCompleted)
        response = events[-1].response
    assert response.text == "Sunny, noon."
    first, second = recorder.bodies
    assert [t["function"]["name"] for t in first["tools"]] == ["get_weather", "get_time"]
    assert second["messages"][1:] == [
        {
            "role": "assistant",
            "content": "Checking Zürich 🌦 and the time…",
            "tool_calls": [
                {
                    "id": "call_DdmO9pD3xa9XTPNJ32zg2hcA",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city":"Zürich"}'},
                },
                {
                    "id": "call_ABtPhwHg1o0JRy8MeMl2p1xQ",
                    "type": "function",
                    "function": {"name": "get_time", "arguments": '{"tz":"Europe/Zurich"}'},
                },
            ],
        },
        {
            "role": "tool",
            "tool_call_id": "call_DdmO9pD3xa9XTPNJ32zg2hcA",
            "content": "sunny in Zürich",
        },
        {
            "role": "tool",
            "tool_call_id": "call_ABtPhwHg1o0JRy8MeMl2p1xQ",
            "content": "12:00 in Europe/Zurich",
        },
    ]
    assert response.usage.requests == 2


# --- odds and ends ---------------------------------------------------------------------


@pytest.mark.anyio
async def test_tool_context_never_reaches_the_wire() -> None:
    recorder = Recorder(completion(), sse_response(fixture("openai_stream_repeated_id_name.sse")))
    req = ChatRequest(
        messages=(UserMessage(content="Hi"),),
        tools=(get_weather,),
        tool_context={"api_token": "tc-SECRET-42"},
    )
    model = model_for(recorder)
    await model.call(req)
    await collect(model, req)
    for sent in recorder.requests:
        assert b"tc-SECRET-42" not in sent.content
        assert "tc-SECRET-42" not in str(sent.headers)


@pytest.mark.anyio
async def test_body_that_is_not_json_serializable_is_a_typed_error() -> None:
    recorder = Recorder()
    with pytest.raises(BadRequestError, match="cannot be sent as JSON"):
        await model_for(recorder).call(request(extra={"seed": {1, 2}}))
    assert recorder.requests == []


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("code", "error_type"), [(503, ProviderUnavailableError), (400, BadRequestError)]
)
async def test_error_object_with_status_200_is_a_typed_error(
    code: int, error_type: type[ProviderError]
) -> None:
    payload = {"error": {"message": "model not loaded", "code": code}}
    recorder = Recorder(httpx.Response(200, json=payload))
    with pytest.raises(error_type, match="model not loaded") as caught:
        await model_for(recorder).call(request())
    assert not isinstance(caught.value, InvalidResponseError)


@pytest.mark.anyio
async def test_stream_reads_choice_zero_and_refusals() -> None:
    other = {"id": "c", "choices": [{"index": 1, "delta": {"content": "other"}}]}
    refusal = _chunk({"refusal": "I can't help with that."}, "content_filter")
    recorder = Recorder(sse_response([f"data: {json.dumps(other)}\n\n".encode(), refusal]))
    events = await collect(model_for(recorder), request())
    assert events[:-1] == [TextDelta("I can't help with that.")]
    assert events[-1].response.finish_reason == "content_filter"


@pytest.mark.anyio
async def test_a_named_key_variable_is_required(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GROQ_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("OPENAI_BASE_URL", "http://localhost:8080/v1")
    recorder = Recorder(completion())
    named = OpenAIChatModel(
        "m",
        base_url="https://api.groq.com/openai/v1",
        api_key_env="GROQ_API_KEY",
        http_client=recorder.client(),
    )
    with pytest.raises(AuthenticationError, match="GROQ_API_KEY"):
        await named.call(request())
    local = OpenAIChatModel("m", http_client=recorder.client())  # OPENAI_BASE_URL, no key
    await local.call(request())
    assert "authorization" not in recorder.requests[0].headers

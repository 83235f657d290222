"""The OpenAI Responses wire format: request bodies, responses, streams, SDK-checked fixtures."""

from __future__ import annotations

import json
import logging
import typing
from typing import Any

import httpx
import pytest

from advisorchain import (
    AssistantMessage,
    Chain,
    ChatOptions,
    ChatRequest,
    ReasoningDelta,
    ResponseCompleted,
    SystemMessage,
    TextDelta,
    ToolCall,
    ToolCallDelta,
    ToolCallingAdvisor,
    ToolMessage,
    Usage,
    UserMessage,
)
from advisorchain.core.errors import ChainConfigurationError, StreamInterruptedError
from advisorchain.core.parts import DocumentPart, ImagePart, ReasoningPart, TextPart
from advisorchain.providers import (
    AuthenticationError,
    BadRequestError,
    OpenAIResponsesChatModel,
    ProviderError,
    ProviderUnavailableError,
    RateLimitError,
    model_from_name,
)
from advisorchain.providers.openai_responses import (
    PROVIDER,
    ResponsesStreamReader,
    input_items,
    request_body,
    response_from_payload,
    text_format,
)
from advisorchain.providers.sse import SSEDecoder

from provider_support import (
    FAST_RETRY,
    HTTPX_ABANDONED_GENERATORS,
    Recorder,
    cuts,
    fixture,
    fixture_json,
    get_time,
    get_weather,
    sse_response,
)

pytestmark = HTTPX_ABANDONED_GENERATORS

KEY = "sk-test-SECRET-0123456789abcdef"

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 8

TOOL_ROUND = "openai_responses_reasoning_tool_calls.json"
TOOL_ROUND_STREAM = "openai_responses_stream_reasoning_tool_calls.sse"
TEXT_ROUND = "openai_responses_text.json"
TEXT_ROUND_STREAM = "openai_responses_stream_text.sse"


def model_for(recorder: Recorder, **kwargs: Any) -> OpenAIResponsesChatModel:
    kwargs.setdefault("api_key", KEY)
    return OpenAIResponsesChatModel(
        "gpt-5", http_client=recorder.client(), retry_policy=FAST_RETRY, **kwargs
    )


def request(*messages: Any, tools: Any = (), **options: Any) -> ChatRequest:
    return ChatRequest(
        messages=messages or (UserMessage(content="Hi"),),
        options=ChatOptions(**options),
        tools=tuple(tools),
    )


def body(req: ChatRequest, *, stream: bool = False, **kwargs: Any) -> dict[str, Any]:
    return request_body(req, model="gpt-5", stream=stream, **kwargs)


def replay(chunks: list[bytes]) -> tuple[list[Any], ResponsesStreamReader]:
    reader = ResponsesStreamReader()
    decoder = SSEDecoder()
    deltas: list[Any] = []
    for chunk in chunks:
        for event in decoder.feed(chunk):
            deltas.extend(reader.receive(event.data, event.event))
    for event in decoder.close():
        deltas.extend(reader.receive(event.data, event.event))
    return deltas, reader


def stream_events(name: str) -> list[dict[str, Any]]:
    return [json.loads(e.data) for e in SSEDecoder().feed(fixture(name))]


# --- request bodies --------------------------------------------------------------------


def test_body_field_by_field() -> None:
    req = request(
        SystemMessage(content="Be brief."),
        UserMessage(content="Weather?"),
        tools=[get_weather],
        temperature=0.2,
        top_p=0.9,
        max_tokens=300,
        tool_choice="required",
        parallel_tool_calls=False,
    )
    assert body(req) == {
        "model": "gpt-5",
        "input": [
            {"type": "message", "role": "system", "content": "Be brief."},
            {"type": "message", "role": "user", "content": "Weather?"},
        ],
        "store": False,
        "include": ["reasoning.encrypted_content"],
        "tools": [
            {
                "type": "function",
                "name": "get_weather",
                "description": "The weather in a city.",
                "parameters": get_weather.definition.parameters,
                "strict": False,
            }
        ],
        "tool_choice": "required",
        "parallel_tool_calls": False,
        "temperature": 0.2,
        "top_p": 0.9,
        "max_output_tokens": 300,
    }


def test_stream_flag_reasoning_options_and_extra_win() -> None:
    req = request(extra={"store": True, "service_tier": "flex"})
    sent = body(req, stream=True, reasoning={"effort": "high", "summary": "auto"})
    assert sent["stream"] is True
    assert sent["reasoning"] == {"effort": "high", "summary": "auto"}
    assert sent["store"] is True and sent["service_tier"] == "flex"
    assert "include" not in body(request(), include=())


def test_tool_choice_named_and_only_with_tools() -> None:
    assert body(request(tools=[get_weather], tool_choice="get_weather"))["tool_choice"] == {
        "type": "function",
        "name": "get_weather",
    }
    plain = body(request(tool_choice="required", parallel_tool_calls=True))
    assert "tool_choice" not in plain and "parallel_tool_calls" not in plain


def test_stop_sequences_are_refused_not_dropped() -> None:
    with pytest.raises(ChainConfigurationError, match="no stop sequences"):
        body(request(stop=("END",)))


def test_structured_output_text_format() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
    assert text_format(schema, name="answer", description="The answer.") == {
        "format": {
            "type": "json_schema",
            "name": "answer",
            "schema": schema,
            "strict": True,
            "description": "The answer.",
        }
    }
    sent = body(request(extra={"text": text_format(schema, strict=False)}))
    assert sent["text"]["format"]["strict"] is False


def test_user_parts_and_tool_results_with_media() -> None:
    items = input_items(
        [
            UserMessage(
                content=(
                    TextPart(text="Look:"),
                    ImagePart(data=PNG),
                    ImagePart(url="https://example.com/a.jpg"),
                    DocumentPart(data=b"%PDF-1.4", name="spec.pdf"),
                )
            ),
            ToolMessage(tool_call_id="call_1", name="shot", content="plain text"),
            ToolMessage(
                tool_call_id="call_2",
                name="shot",
                content=(TextPart(text="a chart"), ImagePart(data=PNG)),
            ),
            ToolMessage(tool_call_id="call_3", name="t", content=(TextPart(text="only text"),)),
        ]
    )
    assert items[0]["content"] == [
        {"type": "input_text", "text": "Look:"},
        {"type": "input_image", "image_url": ImagePart(data=PNG).data_url(), "detail": "auto"},
        {"type": "input_image", "image_url": "https://example.com/a.jpg", "detail": "auto"},
        {
            "type": "input_file",
            "filename": "spec.pdf",
            "file_data": DocumentPart(data=b"%PDF-1.4").data_url(),
        },
    ]
    assert items[1] == {"type": "function_call_output", "call_id": "call_1", "output": "plain text"}
    assert items[2]["output"] == [
        {"type": "input_text", "text": "a chart"},
        {"type": "input_image", "image_url": ImagePart(data=PNG).data_url(), "detail": "auto"},
    ]
    assert items[3]["output"] == "only text"


def test_reasoning_items_go_back_unchanged_in_place() -> None:
    first = response_from_payload(fixture_json(TOOL_ROUND))
    answers = [ToolMessage(tool_call_id=c.id, name=c.name, content="ok") for c in first.tool_calls]
    items = input_items([UserMessage(content="Weather?"), first.message, *answers])
    recorded = fixture_json(TOOL_ROUND)["output"]
    assert items[1] == recorded[0]  # the reasoning item, byte for byte
    assert items[2] == {k: v for k, v in recorded[1].items() if k != "status"}
    assert items[3] == {k: v for k, v in recorded[2].items() if k != "status"}
    assert [i["type"] for i in items[4:]] == ["function_call_output"] * 2


def test_item_ids_are_sent_only_with_their_reasoning() -> None:
    message = AssistantMessage(
        content="Hi",
        tool_calls=(
            ToolCall(id="call_1", name="get_weather", provider_data={PROVIDER: {"id": "fc_1"}}),
        ),
        provider_data={PROVIDER: {"message_id": "msg_1"}},
    )
    items = input_items([message])
    assert items == [
        {"type": "message", "role": "assistant", "content": "Hi"},
        {"type": "function_call", "call_id": "call_1", "name": "get_weather", "arguments": "{}"},
    ]
    with_reasoning = message.model_copy(
        update={
            "content": (
                ReasoningPart(provider=PROVIDER, provider_data={"item": {"type": "reasoning"}}),
                TextPart(text="Hi"),
            )
        }
    )
    items = input_items([with_reasoning])
    assert [i.get("id") for i in items] == [None, "msg_1", "fc_1"]


def test_other_providers_reasoning_is_not_sent() -> None:
    message = AssistantMessage(
        content=(
            ReasoningPart(text="hmm", signature="sig", provider="anthropic"),
            ReasoningPart(provider="openai", provider_data={"item": {"type": "reasoning"}}),
            TextPart(text="Answer"),
        )
    )
    assert [i["type"] for i in input_items([message])] == ["message"]


# --- responses -------------------------------------------------------------------------


def test_response_with_reasoning_and_parallel_calls() -> None:
    response = response_from_payload(fixture_json(TOOL_ROUND))
    assert response.finish_reason == "tool_calls"
    assert response.id == "resp_68af3c1d8f048190a5b4c3d2e1f0a9b8"
    assert response.model == "gpt-5-2025-08-07"
    assert response.usage == Usage(
        input_tokens=1843, output_tokens=412, cached_tokens=1536, requests=1, reasoning_tokens=320
    )
    (reasoning,) = response.message.reasoning
    assert reasoning.provider == PROVIDER
    assert reasoning.text.startswith("**Planning the lookup**") and "🌦" in reasoning.text
    assert reasoning.provider_data == {"item": fixture_json(TOOL_ROUND)["output"][0]}
    assert [(c.id, c.name, json.loads(c.arguments)) for c in response.tool_calls] == [
        ("call_Vx3mN8qL2pR7sT1uW4yZ6aB9", "get_weather", {"city": "Zürich"}),
        ("call_Hk5jG2fD8sA4qW6eR1tY3uI7", "get_time", {"tz": "Europe/Zurich"}),
    ]
    assert response.tool_calls[0].provider_data == {
        PROVIDER: {"id": "fc_68af3c1f9e408190b3c2d1e0f9a8b7c6"}
    }


def test_text_response_keeps_its_message_id() -> None:
    response = response_from_payload(fixture_json(TEXT_ROUND))
    assert response.text == "In Zürich it is sunny… and the time is 12:00 🌦."
    assert response.finish_reason == "stop"
    assert response.message.provider_data == {
        PROVIDER: {"message_id": "msg_68af3c25c3d48190e6f5a4b3c2d1e0f9"}
    }


@pytest.mark.parametrize(
    ("details", "reason"),
    [({"reason": "max_output_tokens"}, "length"), ({"reason": "content_filter"}, "content_filter")],
)
def test_incomplete_responses(details: dict[str, Any], reason: str) -> None:
    payload = {**fixture_json(TEXT_ROUND), "status": "incomplete", "incomplete_details": details}
    assert response_from_payload(payload).finish_reason == reason


def test_refusal_is_the_text_and_a_content_filter() -> None:
    payload = fixture_json(TEXT_ROUND)
    payload["output"][0]["content"] = [{"type": "refusal", "refusal": "I can't help with that."}]
    response = response_from_payload(payload)
    assert (response.text, response.finish_reason) == ("I can't help with that.", "content_filter")


def test_other_output_items_are_kept_and_sent_back() -> None:
    payload = fixture_json(TEXT_ROUND)
    search = {"id": "ws_1", "type": "web_search_call", "status": "completed"}
    payload["output"].insert(0, search)
    response = response_from_payload(payload)
    assert response.message.provider_data == {
        PROVIDER: {"message_id": "msg_68af3c25c3d48190e6f5a4b3c2d1e0f9", "items": [search]}
    }
    assert input_items([response.message])[1] == search


@pytest.mark.parametrize(
    ("code", "kind"),
    [
        ("rate_limit_exceeded", RateLimitError),
        ("server_error", ProviderUnavailableError),
        ("invalid_prompt", BadRequestError),
    ],
)
def test_failed_response_raises_by_code(code: str, kind: type[ProviderError]) -> None:
    payload = {
        **fixture_json(TEXT_ROUND),
        "status": "failed",
        "output": [],
        "error": {"code": code, "message": "it went wrong"},
    }
    with pytest.raises(kind, match="it went wrong") as caught:
        response_from_payload(payload)
    assert caught.value.provider == PROVIDER


def test_unexpected_shapes_raise_parse_errors() -> None:
    with pytest.raises(TypeError):
        response_from_payload({"status": "completed", "output": "nope"})
    with pytest.raises(KeyError):
        response_from_payload({"status": "completed", "output": [{"no": "type"}]})
    bad_call = {"type": "function_call", "call_id": "c", "name": "f", "arguments": {"a": 1}}
    with pytest.raises(TypeError):
        response_from_payload({"status": "completed", "output": [bad_call]})


def test_bad_usage_counts_are_zero() -> None:
    payload = fixture_json(TEXT_ROUND)
    payload["usage"] = {"input_tokens": "12", "output_tokens": -3, "output_tokens_details": None}
    assert response_from_payload(payload).usage == Usage(requests=1)


# --- streams ---------------------------------------------------------------------------


def test_stream_deltas_and_final_response_match_the_call() -> None:
    deltas, reader = replay([fixture(TOOL_ROUND_STREAM)])
    assert reader.done
    reasoning = "".join(d.text for d in deltas if isinstance(d, ReasoningDelta))
    assert reasoning == response_from_payload(fixture_json(TOOL_ROUND)).message.reasoning[0].text
    calls = [d for d in deltas if isinstance(d, ToolCallDelta)]
    assert calls[0] == ToolCallDelta(
        index=0,
        id="call_Vx3mN8qL2pR7sT1uW4yZ6aB9",
        name="get_weather",
        arguments="",
        provider_data={PROVIDER: {"id": "fc_68af3c1f9e408190b3c2d1e0f9a8b7c6"}},
    )
    assert "".join(d.arguments for d in calls if d.index == 1) == '{"tz":"Europe/Zurich"}'
    assert reader.response() == response_from_payload(fixture_json(TOOL_ROUND))


def test_stream_cut_at_every_byte_boundary_gives_the_same_answer() -> None:
    for name, call in ((TOOL_ROUND_STREAM, TOOL_ROUND), (TEXT_ROUND_STREAM, TEXT_ROUND)):
        expected = response_from_payload(fixture_json(call))
        data = fixture(name)
        whole, _ = replay([data])
        for chunks in cuts(data):
            deltas, reader = replay(chunks)
            assert deltas == whole
            assert reader.response() == expected


def test_text_stream_deltas() -> None:
    deltas, reader = replay([fixture(TEXT_ROUND_STREAM)])
    assert all(isinstance(d, TextDelta) for d in deltas)
    assert "".join(d.text for d in deltas if isinstance(d, TextDelta)) == reader.response().text


def test_completed_without_output_is_rebuilt_from_the_items() -> None:
    events = stream_events(TOOL_ROUND_STREAM)
    events[-1]["response"]["output"] = []
    reader = ResponsesStreamReader()
    for event in events:
        reader.receive(json.dumps(event), event["type"])
    assert reader.response() == response_from_payload(fixture_json(TOOL_ROUND))
    # without the done events too: the deltas themselves
    reader = ResponsesStreamReader()
    for event in events:
        if event["type"] != "response.output_item.done":
            reader.receive(json.dumps(event), event["type"])
    rebuilt = reader.response()
    assert [(c.name, c.arguments) for c in rebuilt.tool_calls] == [
        ("get_weather", '{"city":"Zürich"}'),
        ("get_time", '{"tz":"Europe/Zurich"}'),
    ]


def test_stream_cut_before_completed_is_interrupted() -> None:
    data = fixture(TEXT_ROUND_STREAM)
    _, reader = replay([data[: data.index(b"event: response.completed")]])
    assert not reader.done
    with pytest.raises(StreamInterruptedError, match="before response.completed"):
        reader.response()


def test_failure_events_raise_typed_errors() -> None:
    failed = {
        "type": "response.failed",
        "sequence_number": 3,
        "response": {
            **fixture_json(TEXT_ROUND),
            "status": "failed",
            "output": [],
            "error": {"code": "server_error", "message": "The model crashed."},
        },
    }
    with pytest.raises(ProviderUnavailableError, match="The model crashed"):
        ResponsesStreamReader().receive(json.dumps(failed), "response.failed")
    error = {"type": "error", "code": "rate_limit_exceeded", "message": "Slow down", "param": None}
    with pytest.raises(RateLimitError, match="Slow down"):
        ResponsesStreamReader().receive(json.dumps(error), "error")
    with pytest.raises(ProviderError, match="not json"):
        ResponsesStreamReader().receive("not json", "error")


def test_malformed_events_are_interruptions_or_parse_errors() -> None:
    with pytest.raises(StreamInterruptedError):
        ResponsesStreamReader().receive("{nope", "message")
    with pytest.raises(StreamInterruptedError):
        ResponsesStreamReader().receive("[1]", "message")
    orphan = {"type": "response.function_call_arguments.delta", "output_index": 4, "delta": "x"}
    with pytest.raises(ValueError, match="never added"):
        ResponsesStreamReader().receive(json.dumps(orphan))


def test_nothing_is_read_after_completed() -> None:
    _, reader = replay([fixture(TEXT_ROUND_STREAM)])
    late = {"type": "response.output_text.delta", "output_index": 0, "delta": "late"}
    assert reader.receive(json.dumps(late)) == []


# --- the model over HTTP ---------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["call", "stream"])
async def test_chain_sends_the_reasoning_back_on_the_next_round(mode: str) -> None:
    stream = mode == "stream"
    if stream:
        replies = [
            sse_response(fixture(TOOL_ROUND_STREAM)),
            sse_response(fixture(TEXT_ROUND_STREAM)),
        ]
    else:
        replies = [
            httpx.Response(200, json=fixture_json(TOOL_ROUND)),
            httpx.Response(200, json=fixture_json(TEXT_ROUND)),
        ]
    recorder = Recorder(*replies)
    chain = Chain(
        model=model_for(recorder, reasoning={"effort": "medium", "summary": "auto"}),
        advisors=[ToolCallingAdvisor()],
        tools=[get_weather, get_time],
    )
    if stream:
        events = [e async for e in chain.stream("Weather in Zürich?")]
        done = events[-1]
        assert isinstance(done, ResponseCompleted)
        response = done.response
        assert any(isinstance(e, ReasoningDelta) for e in events)
    else:
        response = await chain.call("Weather in Zürich?")
    assert response.text == "In Zürich it is sunny… and the time is 12:00 🌦."
    assert response.usage.reasoning_tokens == 320
    assert response.usage.cached_input_tokens == 1536 + 2048
    assert all(str(r.url) == "https://api.openai.com/v1/responses" for r in recorder.requests)
    assert recorder.requests[0].headers["authorization"] == f"Bearer {KEY}"
    first, second = recorder.bodies
    assert (first["store"], first["include"]) == (False, ["reasoning.encrypted_content"])
    assert first["reasoning"] == {"effort": "medium", "summary": "auto"}
    assert first.get("stream", False) is stream
    output = fixture_json(TOOL_ROUND)["output"]
    assert second["input"][1] == output[0]  # the reasoning item, unchanged
    assert [i.get("id") for i in second["input"][2:4]] == [output[1]["id"], output[2]["id"]]
    assert second["input"][4:] == [
        {
            "type": "function_call_output",
            "call_id": output[1]["call_id"],
            "output": "sunny in Zürich",
        },
        {
            "type": "function_call_output",
            "call_id": output[2]["call_id"],
            "output": "12:00 in Europe/Zurich",
        },
    ]


@pytest.mark.anyio
async def test_key_never_in_repr_errors_or_logs(caplog: pytest.LogCaptureFixture) -> None:
    recorder = Recorder(
        httpx.Response(401, json={"error": {"message": f"Incorrect API key {KEY}"}})
    )
    model = model_for(recorder)
    caplog.set_level(logging.DEBUG)
    with pytest.raises(AuthenticationError) as caught:
        await model.call(request())
    for text in (
        str(caught.value),
        repr(caught.value),
        caught.value.body,
        repr(model),
        caplog.text,
    ):
        assert KEY not in text


@pytest.mark.anyio
async def test_explicit_base_url_never_gets_the_openai_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    recorder = Recorder(httpx.Response(200, json=fixture_json(TEXT_ROUND)))
    model = OpenAIResponsesChatModel(
        "local", base_url="http://127.0.0.1:9/v1", http_client=recorder.client(), include=()
    )
    await model.call(request())
    assert "authorization" not in recorder.requests[0].headers
    assert str(recorder.requests[0].url) == "http://127.0.0.1:9/v1/responses"
    assert "include" not in recorder.bodies[0]


def test_model_from_name() -> None:
    model = model_from_name("openai-responses:gpt-5", api_key=KEY)
    assert isinstance(model, OpenAIResponsesChatModel) and model.model_name == "gpt-5"
    assert "store=False" in repr(model.wire)


# --- the official SDK's types ----------------------------------------------------------


def _event_classes() -> dict[str, Any]:
    responses = pytest.importorskip("openai.types.responses")
    union = typing.get_args(typing.get_args(responses.ResponseStreamEvent)[0])
    return {typing.get_args(c.model_fields["type"].annotation)[0]: c for c in union}


def test_fixtures_validate_against_the_sdk_types() -> None:
    responses = pytest.importorskip("openai.types.responses")
    for name in (TOOL_ROUND, TEXT_ROUND):
        responses.Response.model_validate(fixture_json(name))
    classes = _event_classes()
    for name in (TOOL_ROUND_STREAM, TEXT_ROUND_STREAM):
        for event in stream_events(name):
            classes[event["type"]].model_validate(event)


def test_sdk_validation_can_fail() -> None:
    responses = pytest.importorskip("openai.types.responses")
    pydantic = pytest.importorskip("pydantic")
    broken = fixture_json(TOOL_ROUND)
    broken["output"][1]["arguments"] = {"city": "Zürich"}  # an object, not JSON text
    with pytest.raises(pydantic.ValidationError):
        responses.Response.model_validate(broken)


def _check_typed_dict(value: Any, cls: Any) -> None:
    """`value` validates as the SDK's TypedDict `cls` and has no key `cls` lacks."""
    pydantic = pytest.importorskip("pydantic")
    pydantic.TypeAdapter(cls).validate_python(value)
    assert set(value) <= set(typing.get_type_hints(cls)), (set(value), cls)


def test_request_bodies_validate_against_the_sdk_params() -> None:
    pytest.importorskip("openai")
    from openai.types.responses import (
        EasyInputMessageParam,
        FunctionToolParam,
        ResponseFormatTextJSONSchemaConfigParam,
        ResponseFunctionToolCallParam,
        ResponseInputFileParam,
        ResponseInputImageParam,
        ResponseInputTextParam,
        ResponseOutputMessageParam,
        ResponseReasoningItemParam,
        ToolChoiceFunctionParam,
        response_create_params,
        response_input_param,
    )

    first = response_from_payload(fixture_json(TOOL_ROUND))
    answers = [
        ToolMessage(
            tool_call_id=c.id, name=c.name, content=(TextPart(text="ok"), ImagePart(data=PNG))
        )
        for c in first.tool_calls
    ]
    text = response_from_payload(fixture_json(TEXT_ROUND)).message
    with_reasoning = AssistantMessage(
        content=(first.message.reasoning[0], TextPart(text="Also")),
        provider_data={PROVIDER: {"message_id": "msg_1"}},
    )
    req = request(
        SystemMessage(content="Be brief."),
        UserMessage(
            content=(TextPart(text="Look"), ImagePart(data=PNG), DocumentPart(data=b"%PDF"))
        ),
        first.message,
        *answers,
        text,
        with_reasoning,
        tools=[get_weather],
        tool_choice="get_weather",
        parallel_tool_calls=True,
        max_tokens=50,
        extra={"text": text_format({"type": "object"})},
    )
    sent = body(req, stream=True, reasoning={"effort": "low"})
    _check_typed_dict(sent, response_create_params.ResponseCreateParamsStreaming)
    _check_typed_dict(sent["text"]["format"], ResponseFormatTextJSONSchemaConfigParam)
    _check_typed_dict(sent["tools"][0], FunctionToolParam)
    _check_typed_dict(sent["tool_choice"], ToolChoiceFunctionParam)
    parts = {
        "input_text": ResponseInputTextParam,
        "input_image": ResponseInputImageParam,
        "input_file": ResponseInputFileParam,
    }
    seen = set()
    for item in sent["input"]:
        kind = item["type"]
        if kind == "message" and "id" in item:
            _check_typed_dict(item, ResponseOutputMessageParam)
            kind = "output message"
        elif kind == "message":
            _check_typed_dict(item, EasyInputMessageParam)
            for part in item["content"] if isinstance(item["content"], list) else ():
                if part["type"] in parts:
                    _check_typed_dict(part, parts[part["type"]])
        elif kind == "reasoning":
            _check_typed_dict(item, ResponseReasoningItemParam)
        elif kind == "function_call":
            _check_typed_dict(item, ResponseFunctionToolCallParam)
        elif kind == "function_call_output":
            _check_typed_dict(item, response_input_param.FunctionCallOutput)
        else:
            raise AssertionError(kind)
        seen.add(kind)
    assert seen == {
        "message",
        "output message",
        "reasoning",
        "function_call",
        "function_call_output",
    }

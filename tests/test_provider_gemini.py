"""The Gemini wire format and `GeminiChatModel`: bodies, schemas, answers, streams, keys."""

from __future__ import annotations

import contextlib
import io
import json
import logging
import re
from pathlib import Path
from typing import Any

import httpx
import pytest

import advisorchain
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
    tool,
)
from advisorchain.core.errors import StreamInterruptedError
from advisorchain.core.parts import DocumentPart, ImagePart, ReasoningPart, TextPart
from advisorchain.providers import (
    AuthenticationError,
    BadRequestError,
    GeminiChatModel,
    ProviderError,
    ProviderUnavailableError,
    RateLimitError,
    model_from_name,
)
from advisorchain.providers.gemini import (
    GEMINI_BASE_URL,
    PROVIDER,
    GeminiStreamReader,
    contents,
    request_body,
    request_url,
    response_from_payload,
)
from advisorchain.providers.gemini_schema import gemini_schema, response_format
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

KEY = "AIzaSy-test-SECRET-0123456789abcdef"
PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 8
TOOL_ROUND = "gemini_generate_thought_tool_calls.json"
TOOL_ROUND_STREAM = "gemini_stream_thought_tool_calls.sse"
TEXT_ROUND = "gemini_generate_text.json"
TEXT_ROUND_STREAM = "gemini_stream_text.sse"
BAD_KEY = "gemini_error_api_key_invalid.json"


@tool
def ping() -> str:
    """No parameters at all."""
    return "pong"


def request(*messages: Any, tools: Any = (), **options: Any) -> ChatRequest:
    return ChatRequest(
        messages=messages or (UserMessage(content="Hi"),),
        options=ChatOptions(**options),
        tools=tuple(tools),
    )


def replay(chunks: list[bytes]) -> tuple[list[Any], GeminiStreamReader]:
    reader = GeminiStreamReader()
    decoder = SSEDecoder()
    deltas: list[Any] = []
    for chunk in chunks:
        for event in decoder.feed(chunk):
            deltas.extend(reader.receive(event.data, event.event))
    for event in decoder.close():
        deltas.extend(reader.receive(event.data, event.event))
    return deltas, reader


def model_for(recorder: Recorder, **kwargs: Any) -> GeminiChatModel:
    kwargs.setdefault("api_key", KEY)
    return GeminiChatModel(
        "gemini-2.5-flash", http_client=recorder.client(), retry_policy=FAST_RETRY, **kwargs
    )


# --- schemas ---------------------------------------------------------------------------


def test_schema_translation_and_what_is_dropped() -> None:
    schema = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "properties": {
            "city": {"type": "string", "description": "The city.", "format": "email"},
            "when": {"type": ["string", "null"], "format": "date-time"},
            "unit": {"enum": ["C", "F"], "default": "C"},
            "level": {"enum": [1, 2]},
            "mode": {"const": "fast"},
            "tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": True},
            "place": {"$ref": "#/$defs/Place"},
            "either": {"oneOf": [{"type": "integer"}, {"type": "string"}]},
            "maybe": {"anyOf": [{"type": "number", "minimum": 0}, {"type": "null"}]},
            "empty": {"type": "object", "properties": {}},
        },
        "required": ["city", "ghost"],
        "additionalProperties": False,
        "$defs": {
            "Place": {
                "type": "object",
                "properties": {"name": {"type": "string"}, "parent": {"$ref": "#/$defs/Place"}},
                "required": ["name"],
            }
        },
    }
    translated, dropped = gemini_schema(schema)
    assert translated == {
        "type": "OBJECT",
        "properties": {
            "city": {"type": "STRING", "description": "The city."},
            "when": {"type": "STRING", "format": "date-time", "nullable": True},
            "unit": {"enum": ["C", "F"], "default": "C", "type": "STRING"},
            "level": {},
            "mode": {"enum": ["fast"], "type": "STRING"},
            "tags": {"type": "ARRAY", "items": {"type": "STRING"}},
            "place": {
                "type": "OBJECT",
                "properties": {"name": {"type": "STRING"}, "parent": {"type": "OBJECT"}},
                "required": ["name"],
            },
            "either": {"anyOf": [{"type": "INTEGER"}, {"type": "STRING"}]},
            "maybe": {"type": "NUMBER", "minimum": 0, "nullable": True},
            "empty": {"type": "OBJECT"},
        },
        "required": ["city"],
    }
    assert sorted(dropped) == sorted(
        [
            "$.$schema",
            "$.properties.city.format",
            "$.properties.level.enum",
            "$.properties.tags.uniqueItems",
            "$.properties.place.properties.parent.$ref",
            "$.additionalProperties",
        ]
    )


def test_hostile_schemas_are_bounded_and_reported_not_crashes() -> None:
    deep: dict[str, Any] = {"type": "string"}
    for _ in range(200):
        deep = {"type": "object", "properties": {"x": deep}}
    translated, dropped = gemini_schema(deep)
    assert len(dropped) == 1 and dropped[0].count(".properties.x") > 10
    odd = {"type": 5, "properties": {"a": 3, "b": {"$ref": "#/$defs/B"}}, "$defs": {"B": 7}}
    assert gemini_schema(odd) == (
        {"properties": {"a": {}, "b": {"type": "OBJECT"}}},
        ["$.type", "$.properties.a", "$.properties.b.$ref"],
    )


def test_every_tool_schema_of_the_library_translates_to_sdk_schema() -> None:
    types = pytest.importorskip("google.genai.types")
    for t in (get_weather, get_time):
        translated, dropped = gemini_schema(t.definition.parameters)
        types.Schema.model_validate(translated)
        assert translated["properties"]


# --- request bodies --------------------------------------------------------------------


def test_body_field_by_field() -> None:
    req = request(
        SystemMessage(content="Be brief."),
        UserMessage(content="Weather?"),
        SystemMessage(content="Use metric units."),
        tools=[get_weather, ping],
        temperature=0.3,
        top_p=0.8,
        max_tokens=200,
        stop=("END",),
        tool_choice="get_weather",
        parallel_tool_calls=False,
    )
    body = request_body(req, thinking={"includeThoughts": True, "thinkingBudget": 512})
    assert body == {
        "contents": [{"role": "user", "parts": [{"text": "Weather?"}]}],
        "systemInstruction": {"parts": [{"text": "Be brief.\n\nUse metric units."}]},
        "tools": [
            {
                "functionDeclarations": [
                    {
                        "name": "get_weather",
                        "description": "The weather in a city.",
                        "parameters": gemini_schema(get_weather.definition.parameters)[0],
                    },
                    {"name": "ping", "description": "No parameters at all."},
                ]
            }
        ],
        "toolConfig": {
            "functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["get_weather"]}
        },
        "generationConfig": {
            "temperature": 0.3,
            "topP": 0.8,
            "maxOutputTokens": 200,
            "stopSequences": ["END"],
            "thinkingConfig": {"includeThoughts": True, "thinkingBudget": 512},
        },
    }


@pytest.mark.parametrize(
    ("choice", "mode"), [("auto", "AUTO"), ("none", "NONE"), ("required", "ANY")]
)
def test_tool_choice_modes(choice: str, mode: str) -> None:
    body = request_body(request(tools=[get_weather], tool_choice=choice))
    assert body["toolConfig"] == {"functionCallingConfig": {"mode": mode}}


def test_json_schema_mode_sends_the_schema_as_is() -> None:
    body = request_body(request(tools=[get_weather]), schema_mode="json_schema")
    declaration = body["tools"][0]["functionDeclarations"][0]
    assert declaration["parametersJsonSchema"] == get_weather.definition.parameters
    assert "parameters" not in declaration


def test_extra_merges_one_level_deep_and_structured_output() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}}
    body = request_body(
        request(temperature=0.1, extra={"generationConfig": response_format(schema), "labels": {}})
    )
    assert body["generationConfig"] == {
        "temperature": 0.1,
        "responseMimeType": "application/json",
        "responseJsonSchema": schema,
    }
    assert body["labels"] == {}


def test_url_has_the_model_and_never_the_key() -> None:
    assert request_url(GEMINI_BASE_URL, "models/gemini-2.5-pro", stream=False) == (
        f"{GEMINI_BASE_URL}/models/gemini-2.5-pro:generateContent"
    )
    assert request_url("http://h/v1beta/", "a/../b?x", stream=True) == (
        "http://h/v1beta/models/a%2F..%2Fb%3Fx:streamGenerateContent?alt=sse"
    )


def test_user_media_and_tool_rounds_with_ids_and_signatures() -> None:
    first = response_from_payload(fixture_json(TOOL_ROUND))
    results = [
        ToolMessage(tool_call_id=first.tool_calls[0].id, name="get_weather", content="sunny"),
        ToolMessage(
            tool_call_id=first.tool_calls[1].id,
            name="get_time",
            content=(TextPart(text="boom"), ImagePart(data=PNG)),
            is_error=True,
        ),
    ]
    wire = contents(
        [
            UserMessage(
                content=(
                    TextPart(text="Look"),
                    ImagePart(data=PNG),
                    ImagePart(url="gs://bucket/a.jpg", media_type="image/jpeg"),
                    DocumentPart(data=b"%PDF"),
                )
            ),
            first.message,
            *results,
            UserMessage(content="Thanks"),
        ]
    )
    recorded = fixture_json(TOOL_ROUND)["candidates"][0]["content"]["parts"]
    inline = ImagePart(data=PNG).data_url().partition(",")[2]
    assert wire[0]["parts"] == [
        {"text": "Look"},
        {"inlineData": {"mimeType": "image/png", "data": inline}},
        {"fileData": {"fileUri": "gs://bucket/a.jpg", "mimeType": "image/jpeg"}},
        {"inlineData": {"mimeType": "application/pdf", "data": "JVBERg=="}},
    ]
    assert wire[1] == {"role": "model", "parts": recorded}  # thought, calls, signature as sent
    assert wire[2] == {
        "role": "user",
        "parts": [
            {
                "functionResponse": {
                    "name": "get_weather",
                    "response": {"output": "sunny"},
                    "id": "8f2kq1vd",
                }
            },
            {
                "functionResponse": {
                    "name": "get_time",
                    "response": {"error": "boom"},
                    "id": "3nq7xz0a",
                    "parts": [{"inlineData": {"mimeType": "image/png", "data": inline}}],
                }
            },
        ],
    }
    assert wire[3] == {"role": "user", "parts": [{"text": "Thanks"}]}


def test_calls_without_api_ids_get_local_ids_that_are_never_sent() -> None:
    payload = fixture_json(TOOL_ROUND)
    for part in payload["candidates"][0]["content"]["parts"][1:]:
        del part["functionCall"]["id"]
    first = response_from_payload(payload)
    ids = [c.id for c in first.tool_calls]
    assert len(set(ids)) == 2 and all(i.startswith("gemini_local_") for i in ids)
    wire = contents(
        [
            first.message,
            *(ToolMessage(tool_call_id=i, name="t", content="ok") for i in ids),
        ]
    )
    assert all("id" not in p["functionCall"] for p in wire[0]["parts"][1:])
    assert all("id" not in p["functionResponse"] for p in wire[1]["parts"])


def test_text_signature_goes_back_on_the_last_text_part() -> None:
    answer = response_from_payload(fixture_json(TEXT_ROUND)).message
    recorded = fixture_json(TEXT_ROUND)["candidates"][0]["content"]
    assert contents([answer]) == [recorded]


def test_other_providers_reasoning_and_malformed_arguments() -> None:
    message = AssistantMessage(
        content=(ReasoningPart(text="hmm", signature="s", provider="anthropic"),),
        tool_calls=(ToolCall(id="c1", name="f", arguments="{not json"),),
    )
    assert contents([message])[0]["parts"] == [
        {"functionCall": {"name": "f", "args": {"arguments": "{not json"}, "id": "c1"}}
    ]  # another provider's call id is sent: it pairs the call with its response
    assert contents([AssistantMessage()])[0]["parts"] == [{"text": ""}]


# --- answers ---------------------------------------------------------------------------


def test_answer_with_thought_and_parallel_calls() -> None:
    response = response_from_payload(fixture_json(TOOL_ROUND))
    assert response.finish_reason == "tool_calls"
    assert (response.id, response.model) == ("x8GvaP7aB4-Sz7IPq5aS0Ac", "gemini-2.5-flash")
    assert response.usage == Usage(
        input_tokens=1204, output_tokens=259, cached_tokens=1024, requests=1, reasoning_tokens=221
    )
    (thought,) = response.message.reasoning
    assert thought.provider == PROVIDER and thought.text.endswith("get_time…")
    first, second = response.tool_calls
    assert (first.id, first.name, json.loads(first.arguments)) == (
        "8f2kq1vd",
        "get_weather",
        {"city": "Zürich"},
    )
    signature = fixture_json(TOOL_ROUND)["candidates"][0]["content"]["parts"][1]["thoughtSignature"]
    assert first.provider_data == {PROVIDER: {"thoughtSignature": signature}}
    assert second.provider_data is None


@pytest.mark.parametrize(
    ("wire", "core"),
    [
        ("MAX_TOKENS", "length"),
        ("SAFETY", "content_filter"),
        ("RECITATION", "content_filter"),
        ("MALFORMED_FUNCTION_CALL", "malformed_function_call"),
        (None, "stop"),
    ],
)
def test_finish_reasons(wire: str | None, core: str) -> None:
    payload = fixture_json(TEXT_ROUND)
    payload["candidates"][0]["finishReason"] = wire
    assert response_from_payload(payload).finish_reason == core


def test_blocked_prompt_is_an_empty_content_filter_answer() -> None:
    response = response_from_payload(
        {"promptFeedback": {"blockReason": "SAFETY"}, "usageMetadata": {"promptTokenCount": 9}}
    )
    assert (response.text, response.finish_reason, response.usage.input_tokens) == (
        "",
        "content_filter",
        9,
    )
    with pytest.raises(ValueError, match="without candidates"):
        response_from_payload({})


def test_other_parts_are_kept_and_sent_back() -> None:
    payload = fixture_json(TEXT_ROUND)
    code = {"executableCode": {"language": "PYTHON", "code": "print(1)"}}
    payload["candidates"][0]["content"]["parts"].insert(0, code)
    message = response_from_payload(payload).message
    assert message.provider_data is not None
    assert message.provider_data[PROVIDER]["parts"] == [code]
    assert code in contents([message])[0]["parts"]


@pytest.mark.parametrize(
    "payload",
    [
        {"candidates": [{"content": {"parts": [{"functionCall": {"name": "f", "args": [1]}}]}}]},
        {"candidates": [{"content": {"parts": [{"functionCall": {"args": {}}}]}}]},
        {"candidates": [{"content": {"parts": ["text"]}}]},
        {"candidates": [{"content": {"parts": [{"text": "a", "thoughtSignature": 7}]}}]},
    ],
)
def test_unexpected_shapes_raise_parse_errors(payload: dict[str, Any]) -> None:
    with pytest.raises((TypeError, KeyError)):
        response_from_payload(payload)


def test_error_bodies_raise_by_code() -> None:
    body = {"error": {"code": 429, "message": "Quota exceeded", "status": "RESOURCE_EXHAUSTED"}}
    with pytest.raises(RateLimitError, match="Quota exceeded .RESOURCE_EXHAUSTED."):
        response_from_payload(body)
    with pytest.raises(ProviderError, match="odd"):
        response_from_payload({"error": {"message": "odd"}})


# --- streams ---------------------------------------------------------------------------


def test_stream_deltas_and_final_answer_match_the_call() -> None:
    deltas, reader = replay([fixture(TOOL_ROUND_STREAM)])
    expected = response_from_payload(fixture_json(TOOL_ROUND))
    assert "".join(d.text for d in deltas if isinstance(d, ReasoningDelta)) == (
        expected.message.reasoning[0].text
    )
    assert {d.index for d in deltas if isinstance(d, ReasoningDelta)} == {0}
    calls = [d for d in deltas if isinstance(d, ToolCallDelta)]
    assert [(c.index, c.id, c.name) for c in calls] == [
        (0, "8f2kq1vd", "get_weather"),
        (1, "3nq7xz0a", "get_time"),
    ]
    assert reader.response() == expected
    assert not reader.done


def test_stream_cut_at_every_byte_boundary_gives_the_same_answer() -> None:
    for name, call in ((TOOL_ROUND_STREAM, TOOL_ROUND), (TEXT_ROUND_STREAM, TEXT_ROUND)):
        expected = response_from_payload(fixture_json(call))
        data = fixture(name)
        whole, _ = replay([data])
        for chunks in cuts(data):
            deltas, reader = replay(chunks)
            assert deltas == whole
            assert reader.response() == expected


def test_streamed_calls_without_ids_keep_the_ids_announced() -> None:
    chunk = {
        "candidates": [
            {
                "content": {"parts": [{"functionCall": {"name": "get_weather", "args": {}}}]},
                "finishReason": "STOP",
            }
        ]
    }
    reader = GeminiStreamReader()
    (delta,) = reader.receive(json.dumps(chunk))
    assert isinstance(delta, ToolCallDelta) and delta.id
    assert reader.response().tool_calls[0].id == delta.id


@pytest.mark.anyio
@pytest.mark.parametrize("stream", [False, True])
async def test_a_call_streamed_in_pieces_is_a_clear_error_not_empty_arguments(
    stream: bool,
) -> None:
    # What Vertex AI sends with streamFunctionCallArguments (google-genai's FunctionCall
    # and PartialArg types); the Gemini API has no such feature.
    first = {"functionCall": {"name": "get_weather", "willContinue": True}}
    piece = {
        "functionCall": {
            "partialArgs": [{"jsonPath": "$.city", "stringValue": "Zür", "willContinue": True}],
            "willContinue": True,
        }
    }
    chunks = [
        {"candidates": [{"content": {"role": "model", "parts": [p]}}]} for p in (first, piece)
    ]
    if stream:
        data = "".join(f"data: {json.dumps(c)}\r\n\r\n" for c in chunks).encode()
        model = model_for(Recorder(sse_response(data)))
        events: list[Any] = []
        with pytest.raises(ProviderError, match="streamFunctionCallArguments") as caught:
            async for event in model.stream(request(tools=[get_weather])):
                events.append(event)
        assert events == []  # no call with empty arguments escapes first
    else:
        model = model_for(Recorder(httpx.Response(200, json=chunks[0])))
        with pytest.raises(ProviderError, match="partialArgs / willContinue") as caught:
            await model.call(request(tools=[get_weather]))
    assert KEY not in str(caught.value)
    types = pytest.importorskip("google.genai.types")
    for chunk in chunks:  # the fixture's shape is the SDK's
        types.GenerateContentResponse.model_validate(chunk)


def test_stream_without_a_finish_reason_is_interrupted() -> None:
    data = fixture(TEXT_ROUND_STREAM)
    _, reader = replay([data[: data.rindex(b"data: ")]])
    with pytest.raises(StreamInterruptedError, match="before a finish reason"):
        reader.response()


def test_stream_errors() -> None:
    error = {"error": {"code": 503, "message": "overloaded", "status": "UNAVAILABLE"}}
    with pytest.raises(ProviderError, match="overloaded") as caught:
        GeminiStreamReader().receive(json.dumps(error))
    assert caught.value.status_code == 503
    with pytest.raises(StreamInterruptedError):
        GeminiStreamReader().receive("{cut")
    with pytest.raises(StreamInterruptedError):
        GeminiStreamReader().receive('"a string"')


def test_in_band_errors_take_the_class_their_body_names() -> None:
    bad_key = fixture_json(BAD_KEY)
    with pytest.raises(AuthenticationError, match="API key not valid") as caught:
        GeminiStreamReader().receive(json.dumps(bad_key))
    assert caught.value.status_code == 400
    with pytest.raises(AuthenticationError):
        response_from_payload(bad_key)
    busy = {"error": {"message": "try later", "status": "UNAVAILABLE"}}  # no code at all
    with pytest.raises(ProviderUnavailableError, match="try later"):
        response_from_payload(busy)


# --- the model over HTTP ---------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("stream", [False, True])
async def test_a_bad_key_is_an_authentication_error_on_both_paths(stream: bool) -> None:
    body = fixture_json(BAD_KEY)
    body["error"]["message"] += f" (got {KEY})"  # were the key ever echoed, it is masked
    recorder = Recorder(httpx.Response(400, json=body))
    model = model_for(recorder)
    with pytest.raises(AuthenticationError) as caught:
        if stream:
            [e async for e in model.stream(request())]
        else:
            await model.call(request())
    error = caught.value
    assert not isinstance(error, BadRequestError)
    assert error.status_code == 400 and error.provider == PROVIDER
    assert "API key not valid" in error.message
    assert len(recorder.requests) == 1  # a 400 is not retried
    for text in (str(error), repr(error), error.body, error.message):
        assert KEY not in text


@pytest.mark.anyio
@pytest.mark.parametrize("stream", [False, True])
async def test_a_bad_argument_stays_a_bad_request(stream: bool) -> None:
    body = {
        "error": {
            "code": 400,
            "message": 'Invalid JSON payload received. Unknown name "temprature"',
            "status": "INVALID_ARGUMENT",
            "details": [
                {
                    "@type": "type.googleapis.com/google.rpc.BadRequest",
                    "fieldViolations": [{"field": "temprature", "description": "Unknown name"}],
                }
            ],
        }
    }
    recorder = Recorder(httpx.Response(400, json=body))
    model = model_for(recorder)
    with pytest.raises(BadRequestError, match="Unknown name"):
        if stream:
            [e async for e in model.stream(request())]
        else:
            await model.call(request())


@pytest.mark.anyio
async def test_key_in_the_header_never_in_url_repr_errors_or_logs(
    caplog: pytest.LogCaptureFixture,
) -> None:
    recorder = Recorder(
        httpx.Response(200, json=fixture_json(TEXT_ROUND)),
        httpx.Response(401, json={"error": {"code": 401, "message": f"bad key {KEY}"}}),
    )
    model = model_for(recorder)
    caplog.set_level(logging.DEBUG)
    response = await model.call(request())
    assert response.text.startswith("Zürich")
    sent = recorder.requests[0]
    assert sent.headers["x-goog-api-key"] == KEY
    assert KEY not in str(sent.url)
    assert str(sent.url) == f"{GEMINI_BASE_URL}/models/gemini-2.5-flash:generateContent"
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
async def test_the_key_comes_from_gemini_api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    recorder = Recorder(httpx.Response(200, json=fixture_json(TEXT_ROUND)))
    model = GeminiChatModel("g", http_client=recorder.client())
    with pytest.raises(AuthenticationError, match="GEMINI_API_KEY"):
        await model.call(request())
    monkeypatch.setenv("GEMINI_API_KEY", KEY)
    model = GeminiChatModel("g", http_client=recorder.client())
    await model.call(request())
    assert recorder.requests[0].headers["x-goog-api-key"] == KEY


def test_model_from_name() -> None:
    model = model_from_name("gemini:gemini-2.5-pro", api_key=KEY)
    assert isinstance(model, GeminiChatModel) and model.model_name == "gemini-2.5-pro"


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["call", "stream"])
async def test_chain_runs_two_rounds_and_sends_the_signatures_back(mode: str) -> None:
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
        model=model_for(recorder), advisors=[ToolCallingAdvisor()], tools=[get_weather, get_time]
    )
    if stream:
        events = [e async for e in chain.stream("Weather in Zürich?")]
        done = events[-1]
        assert isinstance(done, ResponseCompleted)
        response = done.response
        assert any(isinstance(e, TextDelta) for e in events)
    else:
        response = await chain.call("Weather in Zürich?")
    assert response.text == "Zürich: sunny ☀ and 12:00 — enjoy the Föhn…"
    assert response.usage.cached_input_tokens == 1024
    verb = "streamGenerateContent?alt=sse" if stream else "generateContent"
    assert all(str(r.url).endswith(verb) for r in recorder.requests)
    second = recorder.bodies[1]["contents"]
    assert second[1] == fixture_json(TOOL_ROUND)["candidates"][0]["content"]
    assert [p["functionResponse"]["response"] for p in second[2]["parts"]] == [
        {"output": "sunny in Zürich"},
        {"output": "12:00 in Europe/Zurich"},
    ]


# --- the official SDK's types ----------------------------------------------------------


def test_fixtures_validate_against_the_sdk_types() -> None:
    types = pytest.importorskip("google.genai.types")
    for name in (TOOL_ROUND, TEXT_ROUND):
        types.GenerateContentResponse.model_validate(fixture_json(name))
    for name in (TOOL_ROUND_STREAM, TEXT_ROUND_STREAM):
        for event in SSEDecoder().feed(fixture(name)):
            types.GenerateContentResponse.model_validate(json.loads(event.data))


def test_sdk_validation_can_fail() -> None:
    types = pytest.importorskip("google.genai.types")
    pydantic = pytest.importorskip("pydantic")
    broken = fixture_json(TOOL_ROUND)
    broken["candidates"][0]["content"]["parts"][1]["functionCall"]["argz"] = {}
    with pytest.raises(pydantic.ValidationError):
        types.GenerateContentResponse.model_validate(broken)


def test_request_bodies_validate_against_the_sdk_types() -> None:
    types = pytest.importorskip("google.genai.types")
    first = response_from_payload(fixture_json(TOOL_ROUND))
    results = [
        ToolMessage(
            tool_call_id=c.id, name=c.name, content=(TextPart(text="ok"), ImagePart(data=PNG))
        )
        for c in first.tool_calls
    ]
    req = request(
        SystemMessage(content="Be brief."),
        UserMessage(
            content=(TextPart(text="Look"), ImagePart(data=PNG), DocumentPart(data=b"%PDF"))
        ),
        first.message,
        *results,
        response_from_payload(fixture_json(TEXT_ROUND)).message,
        tools=[get_weather, get_time, ping],
        tool_choice="required",
        max_tokens=10,
        stop=("x",),
        extra={"generationConfig": response_format({"type": "object"})},
    )
    body = request_body(req, thinking={"includeThoughts": True})
    known = {"contents", "systemInstruction", "tools", "toolConfig", "generationConfig"}
    assert set(body) <= known
    for content in body["contents"]:
        types.Content.model_validate(content)
    types.Content.model_validate(body["systemInstruction"])
    for t in body["tools"]:
        types.Tool.model_validate(t)
    types.ToolConfig.model_validate(body["toolConfig"])
    types.GenerationConfig.model_validate(body["generationConfig"])


# --- the documentation page ------------------------------------------------------------

DOC = Path(advisorchain.__file__).resolve().parent / "docs" / "responses-and-gemini.md"
DOC_EXAMPLE = re.compile(
    r"<!-- tested -->\n```python\n(?P<code>.*?)```\n\nprints\n\n```\n(?P<output>.*?)```", re.S
)


def test_the_page_examples_print_what_the_page_shows() -> None:
    found = list(DOC_EXAMPLE.finditer(DOC.read_text()))
    assert found
    for index, example in enumerate(found):
        output = io.StringIO()
        with contextlib.redirect_stdout(output):
            exec(compile(example["code"], f"{DOC.name}#{index}", "exec"), {"__name__": "docs"})
        assert output.getvalue() == example["output"]

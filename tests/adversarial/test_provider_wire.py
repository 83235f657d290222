"""What OpenAI-compatible servers, Anthropic and gateways send, parsed by
`providers/openai.py` and `providers/anthropic.py`: any chunk, event or response body
gives a typed error or a valid result; in-band errors are typed; parallel tool calls with
a missing or repeated `index` are neither lost nor glued together."""

from __future__ import annotations

import json
from typing import Any

import anyio
import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from advisorchain import (
    AdvisorChainError,
    ChatRequest,
    ChatResponse,
    ProviderError,
    ResponseCompleted,
    StreamEvent,
    UserMessage,
)
from advisorchain.providers import AnthropicChatModel, OpenAIChatModel, RateLimitError
from advisorchain.providers import anthropic as anthropic_wire
from advisorchain.providers import openai as openai_wire

from .strategies import json_values
from .support import PROPERTY, typed_or_value
from provider_support import HTTPX_ABANDONED_GENERATORS, Recorder, sse_response

pytestmark = HTTPX_ABANDONED_GENERATORS

REQUEST = ChatRequest(messages=(UserMessage(content="Hi"),))


def openai_state_run(datas: list[str]) -> Any:
    state = openai_wire._StreamState()
    for data in datas:
        state.receive(data)
    return state.response()


def anthropic_state_run(datas: list[str]) -> Any:
    state = anthropic_wire._StreamState()
    for data in datas:
        state.receive(data)
    return state.response()


# --- any chunk, any event --------------------------------------------------------------

openai_fields = st.fixed_dictionaries(
    {},
    optional={
        "id": json_values,
        "model": json_values,
        "usage": json_values | st.fixed_dictionaries({}, optional={"prompt_tokens": json_values}),
        "choices": json_values
        | st.lists(
            st.fixed_dictionaries(
                {},
                optional={
                    "index": json_values,
                    "finish_reason": json_values,
                    "delta": json_values
                    | st.fixed_dictionaries(
                        {},
                        optional={
                            "content": json_values,
                            "refusal": json_values,
                            "tool_calls": json_values
                            | st.lists(
                                st.fixed_dictionaries(
                                    {},
                                    optional={
                                        "index": json_values,
                                        "id": json_values,
                                        "function": json_values
                                        | st.fixed_dictionaries(
                                            {},
                                            optional={
                                                "name": json_values,
                                                "arguments": json_values,
                                            },
                                        ),
                                    },
                                ),
                                max_size=3,
                            ),
                        },
                    ),
                },
            ),
            max_size=2,
        ),
    },
)
"""Chat Completions chunks whose every field may have any JSON type."""


def datas(chunks: st.SearchStrategy[Any]) -> st.SearchStrategy[list[str]]:
    item = chunks.map(json.dumps) | st.sampled_from(["[DONE]", "", "{", "null", "[]", "nan"])
    return st.lists(item, max_size=8)


@PROPERTY
@given(datas(openai_fields | json_values))
def test_openai_any_chunks_give_a_response_or_a_typed_error(data: list[str]) -> None:
    result = typed_or_value(lambda: openai_state_run(data))
    assert isinstance(result, (ChatResponse, AdvisorChainError))


anthropic_events = st.fixed_dictionaries(
    {
        "type": st.sampled_from(
            [
                "message_start",
                "content_block_start",
                "content_block_delta",
                "content_block_stop",
                "message_delta",
                "message_stop",
                "ping",
                "error",
            ]
        )
    },
    optional={
        "index": st.integers(-1, 3) | json_values,
        "message": json_values
        | st.fixed_dictionaries({}, optional={"id": json_values, "usage": json_values}),
        "content_block": json_values
        | st.fixed_dictionaries(
            {"type": st.sampled_from(["text", "tool_use", "thinking"])},
            optional={"id": json_values, "name": json_values, "input": json_values},
        ),
        "delta": json_values
        | st.fixed_dictionaries(
            {"type": st.sampled_from(["text_delta", "input_json_delta"])},
            optional={
                "text": json_values,
                "partial_json": json_values,
                "stop_reason": json_values,
            },
        ),
        "usage": json_values,
        "error": json_values,
    },
)


@PROPERTY
@given(datas(anthropic_events | json_values))
def test_anthropic_any_events_give_a_response_or_a_typed_error(data: list[str]) -> None:
    result = typed_or_value(lambda: anthropic_state_run(data))
    assert isinstance(result, (ChatResponse, AdvisorChainError))


async def _call(model: Any) -> ChatResponse | AdvisorChainError:
    try:
        response: ChatResponse = await model.call(REQUEST)
    except AdvisorChainError as exc:
        return exc
    return response


@PROPERTY
@given(openai_fields | json_values)
def test_openai_any_response_body_gives_a_response_or_a_typed_error(payload: Any) -> None:
    body = json.dumps(payload).encode()
    recorder = Recorder(httpx.Response(200, content=body))
    model = OpenAIChatModel("m", base_url="http://gw/v1", http_client=recorder.client())
    assert isinstance(anyio.run(_call, model), (ChatResponse, AdvisorChainError))


@PROPERTY
@given(json_values | anthropic_events)
def test_anthropic_any_response_body_gives_a_response_or_a_typed_error(payload: Any) -> None:
    body = json.dumps(payload).encode()
    recorder = Recorder(httpx.Response(200, content=body))
    model = AnthropicChatModel(
        "c", api_key="k", base_url="http://gw", http_client=recorder.client()
    )
    assert isinstance(anyio.run(_call, model), (ChatResponse, AdvisorChainError))


@pytest.mark.parametrize(
    "payload",
    [
        {"choices": [{"message": {"content": "x"}}], "usage": {"prompt_tokens": 1e999}},
        {"choices": [{"message": {"content": "x"}}], "usage": {"completion_tokens": -1e999}},
    ],
)
def test_openai_huge_token_counts_count_as_zero(payload: dict[str, Any]) -> None:
    # before: int(float("inf")) raised OverflowError out of chain.call
    response = openai_wire.completion_response(payload)
    assert response.usage.input_tokens == 0 and response.usage.output_tokens == 0


def test_anthropic_huge_token_counts_count_as_zero() -> None:
    state = anthropic_wire._StreamState()
    state.receive('{"type": "message_start", "message": {"usage": {"input_tokens": 1e999}}}')
    state.receive('{"type": "message_stop"}')
    assert state.response().usage.input_tokens == 0


def test_deeply_nested_chunks_are_typed_errors() -> None:
    deep = "[" * 100_000 + "]" * 100_000
    with pytest.raises(AdvisorChainError):
        openai_run_one(deep)
    with pytest.raises(AdvisorChainError):
        anthropic_wire._StreamState().receive(deep)


def openai_run_one(data: str) -> None:
    openai_wire._StreamState().receive(data)


@pytest.mark.anyio
async def test_deeply_nested_response_body_is_a_typed_error() -> None:
    deep = b"[" * 100_000 + b"]" * 100_000
    recorder = Recorder(httpx.Response(200, content=deep))
    model = OpenAIChatModel("m", base_url="http://gw/v1", http_client=recorder.client())
    with pytest.raises(ProviderError, match="not JSON"):
        await model.call(REQUEST)


# --- in-band errors -------------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("payload", "kind"),
    [
        ({"error": {"message": "quota exceeded", "code": 429}}, RateLimitError),
        ({"error": {"message": "quota exceeded", "code": "429"}}, RateLimitError),
        ({"error": "upstream timed out"}, ProviderError),
        ({"object": "error", "message": "model not loaded", "code": 400}, ProviderError),
    ],
)
async def test_openai_error_object_in_a_200_response(
    payload: dict[str, Any], kind: type[Exception]
) -> None:
    recorder = Recorder(httpx.Response(200, json=payload))
    model = OpenAIChatModel("m", base_url="http://gw/v1", http_client=recorder.client())
    with pytest.raises(kind) as caught:
        await model.call(REQUEST)
    assert any(word in str(caught.value) for word in ("quota", "timed out", "not loaded"))


def sse(*events: str) -> bytes:
    return "".join(f"{e}\n\n" for e in events).encode()


OPENAI_TEXT = 'data: {"choices": [{"index": 0, "delta": {"content": "Hel"}}]}'


async def collect(model: Any) -> list[StreamEvent]:
    return [e async for e in model.stream(REQUEST)]


@pytest.mark.anyio
@pytest.mark.parametrize(
    "error_event",
    [
        'data: {"error": {"message": "overloaded", "code": 503}}',
        'event: error\ndata: {"message": "overloaded"}',
        "event: error\ndata: overloaded, try later",
        'event: error\ndata: {"error": {"message": "overloaded", "type": "server_error"}}',
    ],
)
async def test_openai_error_in_the_stream_is_a_provider_error(error_event: str) -> None:
    # before: `event: error` with a non-error JSON body was skipped, and the stream then
    # failed as "ended before its final event", losing the server's message
    recorder = Recorder(sse_response(sse(OPENAI_TEXT, error_event, "data: [DONE]")))
    model = OpenAIChatModel("m", base_url="http://gw/v1", http_client=recorder.client())
    with pytest.raises(ProviderError, match="overloaded"):
        await collect(model)


@pytest.mark.anyio
async def test_openai_null_error_field_is_not_an_error() -> None:
    # before: a chunk with `"error": null` (some gateways add it) raised ProviderError
    chunk = json.dumps({"error": None, "choices": [{"index": 0, "delta": {"content": "ok"}}]})
    done = json.dumps({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    recorder = Recorder(sse_response(sse(f"data: {chunk}", f"data: {done}", "data: [DONE]")))
    model = OpenAIChatModel("m", base_url="http://gw/v1", http_client=recorder.client())
    events = await collect(model)
    final = events[-1]
    assert isinstance(final, ResponseCompleted) and final.response.text == "ok"


@pytest.mark.anyio
@pytest.mark.parametrize(
    "error_event",
    [
        'event: error\ndata: {"type": "error", "error": {"type": "overloaded_error", '
        '"message": "Overloaded"}}',
        'event: error\ndata: {"error": {"type": "overloaded_error", "message": "Overloaded"}}',
        "event: error\ndata: Overloaded",
    ],
)
async def test_anthropic_error_in_the_stream_is_a_provider_error(error_event: str) -> None:
    start = 'event: message_start\ndata: {"type": "message_start", "message": {"id": "m"}}'
    recorder = Recorder(sse_response(sse(start, error_event)))
    model = AnthropicChatModel(
        "c", api_key="k", base_url="http://gw", http_client=recorder.client()
    )
    with pytest.raises(ProviderError, match="Overloaded"):
        await collect(model)


# --- parallel tool calls whose index is missing or repeated ----------------------------

calls_strategy = st.lists(
    st.tuples(
        st.sampled_from(["get_weather", "get_time", "send_mail"]),
        st.dictionaries(st.sampled_from("abc"), st.integers(), max_size=3),
    ),
    min_size=1,
    max_size=4,
)


def openai_call_chunks(
    calls: list[tuple[str, dict[str, int]]], index_mode: str, piece: int
) -> list[str]:
    """Chunks streaming `calls` one after another, each split into `piece`-char parts."""
    chunks = []
    for number, (name, arguments) in enumerate(calls):
        text = json.dumps(arguments)
        parts = [text[i : i + piece] for i in range(0, len(text), piece)] or [""]
        for k, part in enumerate(parts):
            call: dict[str, Any] = {"function": {"arguments": part}}
            if k == 0:
                call.update(id=f"call_{number}", type="function")
                call["function"]["name"] = name
            if index_mode == "right":
                call["index"] = number
            elif index_mode == "zero":
                call["index"] = 0  # a gateway that numbers every call 0
            chunks.append(json.dumps({"choices": [{"index": 0, "delta": {"tool_calls": [call]}}]}))
    chunks.append(
        json.dumps({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]})
    )
    chunks.append("[DONE]")
    return chunks


@PROPERTY
@given(calls_strategy, st.sampled_from(["right", "zero", "missing"]), st.integers(1, 9))
def test_openai_parallel_calls_survive_missing_or_repeated_index(
    calls: list[tuple[str, dict[str, int]]], index_mode: str, piece: int
) -> None:
    # before: with every index 0, or none, all calls were merged into one call named
    # "get_weatherget_time" whose arguments were '{"a": 1}{"b": 2}'
    response = openai_state_run(openai_call_chunks(calls, index_mode, piece))
    got = [(c.id, c.name, json.loads(c.arguments)) for c in response.message.tool_calls]
    assert got == [(f"call_{n}", name, args) for n, (name, args) in enumerate(calls)]


def test_openai_deltas_are_numbered_like_the_final_calls() -> None:
    state = openai_wire._StreamState()
    indexes = []
    for data in openai_call_chunks([("get_time", {}), ("get_weather", {"a": 1})], "zero", 3):
        indexes += [d.index for d in state.receive(data) if hasattr(d, "index")]
    assert sorted(set(indexes)) == [0, 1]
    assert [c.name for c in state.response().message.tool_calls] == ["get_time", "get_weather"]


def test_openai_parallel_fragments_without_index_keep_their_positions() -> None:
    first = {
        "tool_calls": [
            {"id": "a", "function": {"name": "get_time", "arguments": '{"x"'}},
            {"id": "b", "function": {"name": "get_weather", "arguments": '{"y"'}},
        ]
    }
    rest = {
        "tool_calls": [{"function": {"arguments": ": 1}"}}, {"function": {"arguments": ": 2}"}}]
    }
    chunks = [
        json.dumps({"choices": [{"index": 0, "delta": first}]}),
        json.dumps({"choices": [{"index": 0, "delta": rest}]}),
        "[DONE]",
    ]
    calls = openai_state_run(chunks).message.tool_calls
    assert [(c.id, c.arguments) for c in calls] == [("a", '{"x": 1}'), ("b", '{"y": 2}')]


def test_openai_arguments_sent_as_an_object_are_kept() -> None:
    chunk = {
        "tool_calls": [{"index": 0, "id": "a", "function": {"name": "f", "arguments": {"x": 1}}}]
    }
    calls = openai_state_run(
        [json.dumps({"choices": [{"delta": chunk}]}), "[DONE]"]
    ).message.tool_calls
    assert json.loads(calls[0].arguments) == {"x": 1}


def test_anthropic_repeated_block_index_starts_new_calls() -> None:
    # before: the third tool_use block at an already used index was merged into the second
    events: list[dict[str, Any]] = [{"type": "message_start", "message": {"id": "m"}}]
    for n in range(3):
        events.append(
            {
                "type": "content_block_start",
                "index": 1,
                "content_block": {
                    "type": "tool_use",
                    "id": f"t{n}",
                    "name": "get_time",
                    "input": {},
                },
            }
        )
        events.append(
            {
                "type": "content_block_delta",
                "index": 1,
                "delta": {"type": "input_json_delta", "partial_json": json.dumps({"n": n})},
            }
        )
    events.append({"type": "message_stop"})
    calls = anthropic_state_run([json.dumps(e) for e in events]).message.tool_calls
    assert [(c.id, json.loads(c.arguments)) for c in calls] == [
        (f"t{n}", {"n": n}) for n in range(3)
    ]

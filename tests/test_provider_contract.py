"""The provider contract: what every HTTP provider does the same, run against each
`ProviderCase` of tests/provider_cases.py. A provider's own test file keeps only what is
specific to its wire format (field-by-field bodies, finish reasons, in-band errors)."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterable
from typing import Any

import anyio
import httpx
import pytest

from advisorchain import (
    Chain,
    ChatRequest,
    ChatResponse,
    ResponseCompleted,
    StreamEvent,
    TextDelta,
    ToolCall,
    ToolCallDelta,
    ToolCallingAdvisor,
    Usage,
    UserMessage,
)
from advisorchain.core.model import ChatModel
from advisorchain.providers import (
    AuthenticationError,
    BadRequestError,
    InvalidResponseError,
    ProviderError,
    ProviderStreamError,
    ProviderUnavailableError,
    RateLimitError,
)
from advisorchain.providers.http import client as provider_http

from provider_cases import CASES, Answer, ProviderCase
from provider_support import (
    HTTPX_ABANDONED_GENERATORS,
    ChunkStream,
    Recorder,
    cuts,
    fixture,
    fixture_json,
    get_time,
    get_weather,
    sse_response,
)

pytestmark = [HTTPX_ABANDONED_GENERATORS, pytest.mark.anyio]

KEY = "sk-contract-SECRET-0123456789abcdef"
REQUEST = ChatRequest(messages=(UserMessage(content="Hi"),))
CALLS = (
    ToolCall(id="call_w1", name="get_weather", arguments='{"city":"Zürich"}'),
    ToolCall(id="call_t2", name="get_time", arguments='{"tz":"Europe/Zurich"}'),
)


@pytest.fixture(params=CASES, ids=[c.name for c in CASES])
def case(request: pytest.FixtureRequest) -> ProviderCase:
    found: ProviderCase = request.param
    return found


@pytest.fixture
def waits(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The retry waits, recorded instead of waited."""
    recorded: list[float] = []

    async def sleep(seconds: float) -> None:
        recorded.append(seconds)

    monkeypatch.setattr(provider_http, "_sleep", sleep)
    return recorded


def json_reply(payload: dict[str, Any], status: int = 200, **headers: str) -> httpx.Response:
    return httpx.Response(status, json=payload, headers=headers)


async def collect(model: ChatModel, request: ChatRequest = REQUEST) -> list[StreamEvent]:
    return [event async for event in model.stream(request)]


async def answer(model: ChatModel, stream: bool) -> ChatResponse:
    if not stream:
        return await model.call(REQUEST)
    events = await collect(model)
    final = events[-1]
    assert isinstance(final, ResponseCompleted)
    return final.response


def texts(events: Iterable[StreamEvent]) -> list[str]:
    return [e.text for e in events if isinstance(e, TextDelta)]


# --- answers ----------------------------------------------------------------------------


async def test_text_on_both_paths_with_usage(case: ProviderCase) -> None:
    said = Answer(text="Hello there, dear friend.")
    recorder = Recorder(json_reply(case.reply(said)), sse_response(case.stream(said)))
    model = case.model(recorder.client(), KEY)
    called = await model.call(REQUEST)
    assert (called.text, called.finish_reason) == (said.text, "stop")
    assert called.usage == said.usage and called.usage.cached_input_tokens == 5
    assert not called.message.tool_calls
    events = await collect(model)
    assert len(texts(events)) > 1 and "".join(texts(events)) == said.text
    assert isinstance(events[-1], ResponseCompleted) and events[-1].response == called


async def test_parallel_tool_calls_on_both_paths(case: ProviderCase) -> None:
    said = Answer(text="Checking both.", calls=CALLS)
    recorder = Recorder(json_reply(case.reply(said)), sse_response(case.stream(said)))
    model = case.model(recorder.client(), KEY)
    called = await model.call(REQUEST)
    assert called.message.tool_calls == CALLS
    assert (called.text, called.finish_reason, called.usage) == (
        said.text,
        "tool_calls",
        said.usage,
    )
    events = await collect(model)
    deltas = [e for e in events if isinstance(e, ToolCallDelta)]
    assert {(d.index, d.id, d.name) for d in deltas if d.id} == {
        (0, "call_w1", "get_weather"),
        (1, "call_t2", "get_time"),
    }
    assert isinstance(events[-1], ResponseCompleted) and events[-1].response == called


async def test_a_stream_cut_at_every_byte_boundary_gives_the_same_response(
    case: ProviderCase,
) -> None:
    said = Answer(text="Zürich 🌦 then the time…", calls=CALLS)
    replays = cuts(case.stream(said))
    recorder = Recorder(json_reply(case.reply(said)), *(sse_response(c) for c in replays))
    model = case.model(recorder.client(), KEY)
    called = await model.call(REQUEST)
    for index in range(len(replays)):
        events = await collect(model)
        assert "".join(texts(events)) == said.text, index
        assert isinstance(events[-1], ResponseCompleted) and events[-1].response == called, index


RECORDED = [(case, pair) for case in CASES for pair in case.recorded]


@pytest.mark.parametrize(
    ("case", "pair"), RECORDED, ids=[f"{c.name}-{p[1]}" for c, p in RECORDED], indirect=["case"]
)
async def test_recorded_streams_at_every_byte_boundary_match_their_responses(
    case: ProviderCase, pair: tuple[str, str]
) -> None:
    response, stream = pair
    replays = cuts(fixture(stream), steps=(1, 29))
    recorder = Recorder(
        json_reply(fixture_json(response)), *(sse_response(chunks) for chunks in replays)
    )
    model = case.model(recorder.client(), KEY)
    called = await model.call(REQUEST)
    for index in range(len(replays)):
        events = await collect(model)
        final = events[-1]
        assert isinstance(final, ResponseCompleted) and final.response == called, index


@pytest.mark.parametrize("mode", ["call", "stream"])
async def test_a_two_round_tool_turn_through_a_chain(case: ProviderCase, mode: str) -> None:
    first = Answer(calls=CALLS, usage=Usage(10, 4, 0, 1))
    second = Answer(text="Sunny, and it is noon.", usage=Usage(30, 6, 8, 1))
    if mode == "call":
        recorder = Recorder(json_reply(case.reply(first)), json_reply(case.reply(second)))
    else:
        recorder = Recorder(sse_response(case.stream(first)), sse_response(case.stream(second)))
    chain = Chain(
        [ToolCallingAdvisor()],
        model=case.model(recorder.client(), KEY),
        tools=[get_weather, get_time],
    )
    if mode == "call":
        response = await chain.call("Weather and time in Zürich?")
    else:
        events = [e async for e in chain.stream("Weather and time in Zürich?")]
        final = events[-1]
        assert isinstance(final, ResponseCompleted)
        assert "".join(texts(events)) == second.text
        response = final.response
    assert response.text == second.text
    assert response.usage == Usage(40, 10, 8, 2)
    assert case.tool_results(recorder.bodies[0]) == []
    assert case.tool_results(recorder.bodies[1]) == [
        ("call_w1", "sunny in Zürich"),
        ("call_t2", "12:00 in Europe/Zurich"),
    ]


# --- failures ---------------------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True])
async def test_401_is_an_authentication_error_and_not_retried(
    case: ProviderCase, stream: bool, waits: list[float]
) -> None:
    recorder = Recorder(json_reply(case.error(401, "invalid x-api-key"), 401))
    with pytest.raises(AuthenticationError, match="invalid x-api-key") as caught:
        await answer(case.model(recorder.client(), KEY), stream)
    assert caught.value.status_code == 401 and caught.value.provider == case.name
    assert len(recorder.requests) == 1 and waits == []


@pytest.mark.parametrize("stream", [False, True])
async def test_429_waits_as_long_as_retry_after_says_then_succeeds(
    case: ProviderCase, stream: bool, waits: list[float]
) -> None:
    said = Answer(text="Fine now.")
    limited = json_reply(case.error(429, "slow down"), 429, **{"retry-after": "3"})
    success = sse_response(case.stream(said)) if stream else json_reply(case.reply(said))
    recorder = Recorder(limited, success)
    response = await answer(case.model(recorder.client(), KEY), stream)
    assert response.text == said.text
    assert waits == [3.0] and len(recorder.requests) == 2


async def test_429_after_the_retries_is_a_rate_limit_error_with_its_wait(
    case: ProviderCase, waits: list[float]
) -> None:
    limited = json_reply(case.error(429, "slow down"), 429, **{"retry-after": "2"})
    recorder = Recorder(limited, limited, limited)
    with pytest.raises(RateLimitError, match="slow down") as caught:
        await case.model(recorder.client(), KEY).call(REQUEST)
    assert caught.value.retry_after == 2.0 and caught.value.status_code == 429
    assert waits == [2.0, 2.0] and len(recorder.requests) == 3


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("status", [500, 503])
async def test_5xx_is_retried_then_unavailable(
    case: ProviderCase, stream: bool, status: int, waits: list[float]
) -> None:
    failed = json_reply(case.error(status, "try later"), status)
    recorder = Recorder(failed, failed, failed)
    with pytest.raises(ProviderUnavailableError, match="try later") as caught:
        await answer(case.model(recorder.client(), KEY), stream)
    assert caught.value.status_code == status
    assert len(recorder.requests) == 3 and len(waits) == 2


@pytest.mark.parametrize(
    ("status", "error_type", "attempts"),
    [
        (400, BadRequestError, 1),
        (401, AuthenticationError, 1),
        (403, AuthenticationError, 1),
        (404, BadRequestError, 1),
        (429, RateLimitError, 3),
        (500, ProviderUnavailableError, 3),
        (529, ProviderUnavailableError, 3),
    ],
)
async def test_status_codes_map_to_typed_errors(
    case: ProviderCase, status: int, error_type: type[ProviderError], attempts: int
) -> None:
    def reply(_: httpx.Request) -> httpx.Response:
        return json_reply(case.error(status, f"says {status}"), status, **{"request-id": "req_9"})

    recorder = Recorder(reply, reply, reply)
    with pytest.raises(error_type) as caught:
        await case.model(recorder.client(), KEY).call(REQUEST)
    error = caught.value
    assert type(error) is error_type and len(recorder.requests) == attempts
    assert (error.status_code, error.request_id, error.provider) == (status, "req_9", case.name)
    assert f"says {status}" in str(error) and "req_9" in str(error)
    assert f"says {status}" in error.body


async def test_an_unreadable_response_is_an_invalid_response_error(case: ProviderCase) -> None:
    recorder = Recorder(httpx.Response(200, content=b"<html>oops</html>"))
    with pytest.raises(InvalidResponseError, match=case.name):
        await case.model(recorder.client(), KEY).call(REQUEST)


async def test_a_stream_cut_short_raises_after_the_text_already_yielded(
    case: ProviderCase,
) -> None:
    body = case.stream(Answer(text="Hello there friend"))
    cut = body.index(b"\n\n", body.index(b"Hello")) + 2  # after the first word's event
    recorder = Recorder(sse_response(body[:cut]))
    seen: list[StreamEvent] = []
    with pytest.raises(ProviderStreamError, match=case.name):
        async for event in case.model(recorder.client(), KEY).stream(REQUEST):
            seen.append(event)
    assert texts(seen) == ["Hello "]


class BrokenStream(ChunkStream):
    """A body that loses its connection after its chunks."""

    async def __anext__(self) -> bytes:
        if self.sent >= len(self.chunks):
            raise httpx.ReadError("connection reset by peer")
        return await super().__anext__()


async def test_a_connection_lost_mid_stream_is_a_stream_error_not_a_retry(
    case: ProviderCase, waits: list[float]
) -> None:
    body = case.stream(Answer(text="Hello there friend"))
    cut = body.index(b"\n\n", body.index(b"Hello")) + 2
    stream = BrokenStream([body[:cut]])
    recorder = Recorder(
        httpx.Response(200, headers={"content-type": "text/event-stream"}, stream=stream)
    )
    seen: list[StreamEvent] = []
    with pytest.raises(ProviderStreamError, match="broke off") as caught:
        async for event in case.model(recorder.client(), KEY).stream(REQUEST):
            seen.append(event)
    assert texts(seen) == ["Hello "] and stream.closed
    assert isinstance(caught.value.__cause__, httpx.ReadError)
    assert len(recorder.requests) == 1 and waits == []


# --- cancellation -----------------------------------------------------------------------


async def test_leaving_a_stream_early_closes_the_response(case: ProviderCase) -> None:
    body = ChunkStream([case.stream(Answer(text="one two three four"))])
    recorder = Recorder(
        httpx.Response(200, headers={"content-type": "text/event-stream"}, stream=body)
    )
    events = case.model(recorder.client(), KEY).stream(REQUEST)
    assert isinstance(events, AsyncIterator)
    async for event in events:
        if isinstance(event, TextDelta):
            break
    await events.aclose()  # type: ignore[attr-defined]
    assert body.closed


class StalledStream(ChunkStream):
    """A body whose server stops sending after its chunks (the read waits forever)."""

    async def __anext__(self) -> bytes:
        if self.sent >= len(self.chunks):
            await anyio.sleep_forever()
        return await super().__anext__()


async def test_a_stream_cancelled_while_waiting_for_the_server_closes_the_response(
    case: ProviderCase,
) -> None:
    body = case.stream(Answer(text="one two three four"))
    stalled = StalledStream([body[: body.index(b"\n\n", body.index(b"one")) + 2]])
    recorder = Recorder(
        httpx.Response(200, headers={"content-type": "text/event-stream"}, stream=stalled)
    )
    seen: list[StreamEvent] = []
    with anyio.CancelScope() as scope:
        async for event in case.model(recorder.client(), KEY).stream(REQUEST):
            seen.append(event)
            scope.cancel()  # delivered inside the stream, waiting for the next bytes
    assert scope.cancelled_caught and texts(seen) == ["one "]
    assert stalled.closed


# --- keys -------------------------------------------------------------------------------


async def test_the_key_is_never_in_errors_reprs_or_logs(
    case: ProviderCase, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    recorder = Recorder(
        httpx.Response(500, text=f"upstream rejected {KEY}"),
        json_reply(case.error(401, f"Incorrect API key provided: {KEY}"), 401),
    )
    model = case.model(recorder.client(), KEY)
    with pytest.raises(AuthenticationError) as caught:
        await model.call(REQUEST)
    error = caught.value
    for text in (repr(model), str(vars(model)), str(error), repr(error), error.body, caplog.text):
        assert KEY not in text
    assert "Incorrect API key provided: ***" in str(error)
    assert "retry 1 of 2" in caplog.text  # the retry was logged, without the key


async def test_a_missing_key_names_its_variable_and_sends_nothing(
    case: ProviderCase, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(case.key_env, raising=False)
    recorder = Recorder()
    model = case.model(recorder.client(), None)  # no error before the first call
    with pytest.raises(AuthenticationError, match=case.key_env):
        await model.call(REQUEST)
    with pytest.raises(AuthenticationError, match=case.key_env):
        await collect(model)
    assert recorder.requests == []


async def test_the_key_comes_from_its_variable_at_the_first_call(
    case: ProviderCase, monkeypatch: pytest.MonkeyPatch
) -> None:
    said = Answer(text="ok")
    recorder = Recorder(json_reply(case.reply(said)))
    model = case.model(recorder.client(), None)
    monkeypatch.setenv(case.key_env, f"  {KEY}\n")
    assert (await model.call(REQUEST)).text == "ok"
    (sent,) = recorder.requests
    carrying = [value for value in sent.headers.values() if KEY in value]
    assert carrying and all(v.endswith(KEY) and not v.startswith(" ") for v in carrying)

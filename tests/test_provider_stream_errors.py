"""Issue 32 item 7: provider errors stay typed and say what happened once. A stream's
`error` event for a rate limit or an overload is the retryable `RateLimitError` /
`ProviderUnavailableError` in every provider, whether the code or the type says it; a
200 response that is not an event stream (an HTML page) is one `ProviderStreamError`
naming that, with the provider's name once, on all four providers."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from advisorchain import ChatRequest, UserMessage
from advisorchain.core.errors import StreamInterruptedError
from advisorchain.providers import (
    InvalidResponseError,
    ProviderError,
    ProviderStreamError,
    ProviderUnavailableError,
    RateLimitError,
)

from provider_cases import CASES, ProviderCase
from provider_support import HTTPX_ABANDONED_GENERATORS, Recorder, sse_response

pytestmark = [HTTPX_ABANDONED_GENERATORS, pytest.mark.anyio]

KEY = "sk-stream-errors-0123456789abcdef"
REQUEST = ChatRequest(messages=(UserMessage(content="Hi"),))
CASE = {c.name: c for c in CASES}


def event(payload: dict[str, Any], name: str | None = None) -> bytes:
    head = f"event: {name}\n" if name else ""
    return f"{head}data: {json.dumps(payload)}\n\n".encode()


STREAM_ERRORS: list[tuple[str, bytes, type[ProviderError]]] = [
    # OpenAI Responses: the `error` event's code, or its error object's type
    (
        "openai-responses",
        event(
            {"type": "error", "code": "too_many_requests", "message": "slow down"},
            "error",
        ),
        RateLimitError,
    ),
    (
        "openai-responses",
        event(
            {
                "type": "error",
                "error": {"type": "too_many_requests", "code": None, "message": "slow down"},
            },
            "error",
        ),
        RateLimitError,
    ),
    (
        "openai-responses",
        event({"type": "error", "code": "server_overloaded", "message": "busy"}, "error"),
        ProviderUnavailableError,
    ),
    # OpenAI Chat Completions: an in-band error chunk with a string code or type
    (
        "openai",
        event({"error": {"message": "Rate limit reached", "type": "too_many_requests"}}),
        RateLimitError,
    ),
    (
        "openai",
        event({"error": {"message": "slow down", "code": "rate_limit_exceeded"}}, "error"),
        RateLimitError,
    ),
    (
        "openai",
        event({"error": {"message": "overloaded", "type": "server_error", "code": None}}),
        ProviderUnavailableError,
    ),
    # Anthropic: a type its table does not list
    (
        "anthropic",
        event({"type": "error", "error": {"type": "too_many_requests", "message": "x"}}, "error"),
        RateLimitError,
    ),
    (
        "anthropic",
        event({"type": "error", "error": {"type": "overloaded_error", "message": "x"}}, "error"),
        ProviderUnavailableError,
    ),
    # Gemini: a status without a numeric code
    (
        "gemini",
        event({"error": {"status": "RESOURCE_EXHAUSTED", "message": "quota"}}),
        RateLimitError,
    ),
    (
        "gemini",
        event({"error": {"status": "INTERNAL", "message": "oops"}}),
        ProviderUnavailableError,
    ),
]


@pytest.mark.issue32(7)
@pytest.mark.parametrize(
    ("provider", "body", "expected"),
    STREAM_ERRORS,
    ids=[f"{p}-{e.__name__}-{i}" for i, (p, _, e) in enumerate(STREAM_ERRORS)],
)
async def test_rate_limits_and_overloads_in_a_stream_stay_retryable(
    provider: str, body: bytes, expected: type[ProviderError]
) -> None:
    model = CASE[provider].model(Recorder(sse_response(body)).client(), KEY)
    with pytest.raises(ProviderError) as caught:
        async for _ in model.stream(REQUEST):
            pass
    assert type(caught.value) is expected, repr(caught.value)
    assert str(caught.value).startswith(f"{provider}: ")


HTML = (
    b"<!DOCTYPE html>\n<html><head><title>Sign in to the proxy</title></head>"
    b"<body>" + b"x" * 2000 + b"</body></html>"
)


@pytest.fixture(params=CASES, ids=[c.name for c in CASES])
def case(request: pytest.FixtureRequest) -> ProviderCase:
    found: ProviderCase = request.param
    return found


@pytest.mark.issue32(7)
async def test_an_html_page_with_status_200_is_one_clear_error_on_both_paths(
    case: ProviderCase,
) -> None:
    def html() -> httpx.Response:
        return httpx.Response(200, content=HTML, headers={"content-type": "text/html"})

    recorder = Recorder(html(), html())
    model = case.model(recorder.client(), KEY)
    with pytest.raises(ProviderStreamError) as streamed:
        async for _ in model.stream(REQUEST):
            pass
    error = streamed.value
    message = str(error)
    assert message.startswith(f"{case.name}: the response is not an event stream (text/html)")
    assert message.count(f"{case.name}:") == 1
    assert "Sign in to the proxy" in message and len(message) < 300
    assert error.status_code == 200 and error.body.startswith("<!DOCTYPE html>")
    assert isinstance(error.__cause__, StreamInterruptedError)
    with pytest.raises(InvalidResponseError) as called:
        await model.call(REQUEST)
    assert str(called.value).count(f"{case.name}:") == 1
    assert len(recorder.requests) == 2  # neither is retried


@pytest.mark.issue32(7)
async def test_an_empty_event_stream_names_the_provider_once(case: ProviderCase) -> None:
    model = case.model(Recorder(sse_response(b"")).client(), KEY)
    with pytest.raises(ProviderStreamError) as caught:
        async for _ in model.stream(REQUEST):
            pass
    message = str(caught.value)
    assert message.startswith(f"{case.name}: the stream ended before")
    assert message.count(f"{case.name}:") == 1


IN_BAND = {
    "openai": {"error": {"message": "Rate limit reached", "code": "rate_limit_exceeded"}},
    "anthropic": {"type": "error", "error": {"type": "rate_limit_error", "message": "slow"}},
    "openai-responses": {"error": {"code": "rate_limit_exceeded", "message": "slow"}},
    "gemini": {"error": {"code": 429, "status": "RESOURCE_EXHAUSTED", "message": "quota"}},
}


@pytest.mark.issue32(7)
async def test_a_json_error_body_with_status_200_on_a_stream_stays_typed(
    case: ProviderCase,
) -> None:
    body = IN_BAND[case.name]
    model = case.model(Recorder(httpx.Response(200, json=body)).client(), KEY)
    with pytest.raises(RateLimitError) as caught:
        async for _ in model.stream(REQUEST):
            pass
    assert str(caught.value).count(f"{case.name}:") == 1
    model = case.model(Recorder(httpx.Response(200, json=body)).client(), KEY)
    with pytest.raises(RateLimitError):
        await model.call(REQUEST)


@pytest.mark.issue32(7)
async def test_a_deeply_nested_json_body_on_a_stream_is_a_stream_error(case: ProviderCase) -> None:
    reply = httpx.Response(200, content=b"[" * 3000, headers={"content-type": "application/json"})
    model = case.model(Recorder(reply).client(), KEY)
    with pytest.raises(ProviderStreamError, match="not an event stream"):
        async for _ in model.stream(REQUEST):
            pass

"""Issue 15 item 2: an API key never leaks, and `except ProviderError` catches every
provider failure.

A key read from a file or a Kubernetes secret often ends with a newline: it is stripped at
construction (and when read from the environment), so the request goes out with the key
itself, over a real connection (h11 refuses a header value with a newline, quoting it). A
key that holds control or non-ASCII characters inside is refused with a typed error that
does not quote it. Any error the HTTP client raises while sending (or reading) becomes a
typed `ProviderError` in whose message, repr, chained causes and log records the key does
not appear.
"""

from __future__ import annotations

import json
import logging
import threading
import traceback
from collections.abc import AsyncIterator, Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest

from advisorchain import (
    ChatModel,
    ChatRequest,
    ResponseCompleted,
    StreamInterruptedError,
    UserMessage,
)
from advisorchain.providers import (
    AnthropicChatModel,
    AuthenticationError,
    InvalidAPIKeyError,
    OpenAIChatModel,
    ProviderError,
    RetryPolicy,
)
from advisorchain.providers.errors import BODY_EXCERPT_CHARS

from provider_support import HTTPX_ABANDONED_GENERATORS

pytestmark = HTTPX_ABANDONED_GENERATORS

KEY = "sk-test-9f8e7d6c5b4a3210"
REQUEST = ChatRequest(messages=(UserMessage(content="Hi"),))
NO_RETRY = RetryPolicy(max_retries=0)

Model = OpenAIChatModel | AnthropicChatModel


def assert_no_key(exc: BaseException, key: str = KEY) -> None:
    """`key` is in no message, repr or argument of `exc` and of the exceptions it chains."""
    assert key not in "".join(traceback.format_exception(exc))
    stack: list[BaseException] = [exc]
    seen: set[int] = set()
    while stack:
        e = stack.pop()
        if id(e) in seen:
            continue
        seen.add(id(e))
        for text in (str(e), repr(e), *map(repr, e.args), str(getattr(e, "body", ""))):
            assert key not in text, (type(e).__name__, text)
        stack.extend(x for x in (e.__cause__, e.__context__) if x is not None)


def assert_no_key_logged(caplog: pytest.LogCaptureFixture, key: str = KEY) -> None:
    for record in caplog.records:
        assert key not in record.getMessage()
        assert key not in repr(record.args)
        assert key not in (record.exc_text or "")


# -- a real server: h11 checks header values on a real connection ------------------------------


class Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.headers_seen: list[dict[str, str]] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: Server

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))))
        self.server.headers_seen.append({k.lower(): v for k, v in self.headers.items()})
        anthropic = self.path.endswith("/v1/messages")
        if body.get("stream"):
            data = ANTHROPIC_SSE if anthropic else OPENAI_SSE
            content_type = "text/event-stream"
        else:
            data = json.dumps(ANTHROPIC_MESSAGE if anthropic else OPENAI_COMPLETION).encode()
            content_type = "application/json"
        self.send_response(200)
        self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


OPENAI_COMPLETION = {
    "id": "c1",
    "choices": [{"index": 0, "message": {"content": "Hello"}, "finish_reason": "stop"}],
}
OPENAI_SSE = (
    b'data: {"id": "c1", "choices": [{"index": 0, "delta": {"content": "Hello"}, '
    b'"finish_reason": "stop"}]}\n\ndata: [DONE]\n\n'
)
ANTHROPIC_MESSAGE = {
    "id": "m1",
    "content": [{"type": "text", "text": "Hello"}],
    "stop_reason": "end_turn",
    "usage": {"input_tokens": 1, "output_tokens": 1},
}
ANTHROPIC_SSE = b"".join(
    f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode()
    for e in (
        {"type": "message_start", "message": {"id": "m1", "usage": {"input_tokens": 1}}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "text_delta", "text": "Hello"},
        },
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {}},
        {"type": "message_stop"},
    )
)


@pytest.fixture
def server() -> Iterator[Server]:
    srv = Server()
    thread = threading.Thread(target=srv.serve_forever, args=(0.01,), daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()
    thread.join(5)


def make(provider: str, base_url: str, **kwargs: Any) -> Model:
    if provider == "openai":
        return OpenAIChatModel("m", base_url=f"{base_url}/v1", retry_policy=NO_RETRY, **kwargs)
    return AnthropicChatModel("c", base_url=base_url, retry_policy=NO_RETRY, **kwargs)


def sent_key(provider: str, headers: dict[str, str]) -> str:
    if provider == "openai":
        return headers["authorization"]
    return headers["x-api-key"]


def env_name(provider: str) -> str:
    return "TEST_OPENAI_KEY" if provider == "openai" else "ANTHROPIC_API_KEY"


def with_key(
    provider: str, key: str, source: str, monkeypatch: pytest.MonkeyPatch
) -> dict[str, Any]:
    """The constructor arguments that give the model `key` from `source`."""
    if source == "argument":
        return {"api_key": key}
    monkeypatch.setenv(env_name(provider), key)
    return {"api_key_env": env_name(provider)} if provider == "openai" else {}


async def answer(model: ChatModel, stream: bool) -> str:
    if not stream:
        return (await model.call(REQUEST)).text
    events = [e async for e in model.stream(REQUEST)]
    final = events[-1]
    assert isinstance(final, ResponseCompleted)
    return final.response.text


PROVIDERS = pytest.mark.parametrize("provider", ["openai", "anthropic"])
SOURCES = pytest.mark.parametrize("source", ["argument", "env"])
STREAM = pytest.mark.parametrize("stream", [False, True], ids=["call", "stream"])


@pytest.mark.anyio
@PROVIDERS
@SOURCES
@STREAM
@pytest.mark.parametrize(
    "padded", [KEY + "\n", KEY + "\r\n", "  " + KEY, "\t" + KEY + " \n"], ids=repr
)
async def test_surrounding_whitespace_is_stripped(
    server: Server,
    provider: str,
    source: str,
    stream: bool,
    padded: str,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    async with make(
        provider, server.url, **with_key(provider, padded, source, monkeypatch)
    ) as model:
        try:
            text = await answer(model, stream)
        except BaseException as exc:  # what the bug looked like: a raw error quoting the key
            assert_no_key(exc)
            raise
    assert text == "Hello"
    (headers,) = server.headers_seen
    expected = f"Bearer {KEY}" if provider == "openai" else KEY
    assert sent_key(provider, headers) == expected
    assert_no_key_logged(caplog)


@pytest.mark.anyio
@PROVIDERS
@SOURCES
@pytest.mark.parametrize(
    "bad", [KEY[:6] + "\n" + KEY[6:], KEY[:6] + "\x00" + KEY[6:], KEY + "\x7f", KEY + "é"], ids=repr
)
async def test_a_key_with_inner_control_characters_is_refused_without_quoting_it(
    provider: str, source: str, bad: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if source == "env" and "\x00" in bad:
        pytest.skip("an environment variable cannot hold a NUL")

    def refuse() -> Any:
        return pytest.raises(InvalidAPIKeyError, match="API key")

    if source == "argument":
        with refuse() as caught:
            make(provider, "http://127.0.0.1:9", **with_key(provider, bad, source, monkeypatch))
    else:
        model = make(provider, "http://127.0.0.1:9", **with_key(provider, bad, source, monkeypatch))
        with refuse() as caught:
            await model.call(REQUEST)
    assert isinstance(caught.value, AuthenticationError) and isinstance(caught.value, ValueError)
    for part in (KEY[:6], KEY[6:], bad):
        assert_no_key(caught.value, part)


# -- errors the HTTP client raises: typed, and the key nowhere ---------------------------------


def raising(error: Callable[[str], Exception]) -> httpx.MockTransport:
    def handler(request: httpx.Request) -> httpx.Response:
        value = request.headers.get("authorization") or request.headers["x-api-key"]
        raise error(f"Illegal header value {value.encode()!r}")

    return httpx.MockTransport(handler)


HTTPX_ERRORS: list[Callable[[str], Exception]] = [
    httpx.LocalProtocolError,
    httpx.RemoteProtocolError,
    httpx.UnsupportedProtocol,
    httpx.ProxyError,
    httpx.ConnectError,
    httpx.ReadError,
    httpx.WriteError,
    httpx.ReadTimeout,
    httpx.PoolTimeout,
    httpx.DecodingError,
    httpx.TooManyRedirects,
    httpx.InvalidURL,
]


@pytest.mark.anyio
@PROVIDERS
@STREAM
@pytest.mark.parametrize("error", HTTPX_ERRORS, ids=lambda e: e.__name__)
async def test_client_errors_quoting_the_key_become_redacted_provider_errors(
    provider: str,
    stream: bool,
    error: Callable[[str], Exception],
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    async with httpx.AsyncClient(transport=raising(error)) as client:
        model = make(provider, "http://x", api_key=KEY, http_client=client)
        with pytest.raises(ProviderError) as caught:
            await answer(model, stream)
    assert_no_key(caught.value)
    assert_no_key_logged(caplog)
    assert caught.value.provider == provider


class Breaking(httpx.AsyncByteStream):
    """A body that breaks off with an error quoting the key."""

    def __init__(self, first: bytes, error: Exception) -> None:
        self.first = first
        self.error = error

    async def __aiter__(self) -> AsyncIterator[bytes]:
        yield self.first
        raise self.error


@pytest.mark.anyio
@PROVIDERS
@pytest.mark.parametrize(
    "error",
    [httpx.ReadError, httpx.RemoteProtocolError, httpx.DecodingError],
    ids=lambda e: e.__name__,
)
async def test_a_stream_that_breaks_is_a_provider_error_and_quotes_no_key(
    provider: str, error: Callable[[str], Exception]
) -> None:
    first = (OPENAI_SSE if provider == "openai" else ANTHROPIC_SSE).split(b"\n\n")[0] + b"\n\n"

    def handler(request: httpx.Request) -> httpx.Response:
        stream = Breaking(first, error(f"peer echoed {KEY}"))
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, stream=stream)

    async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as client:
        model = make(provider, "http://x", api_key=KEY, http_client=client)
        with pytest.raises(ProviderError) as caught:
            await answer(model, stream=True)
    assert isinstance(caught.value, StreamInterruptedError)  # still what it was
    assert_no_key(caught.value)


@pytest.mark.anyio
@PROVIDERS
@STREAM
async def test_an_unreadable_answer_is_a_provider_error(provider: str, stream: bool) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        if stream:
            return httpx.Response(
                200, headers={"content-type": "text/event-stream"}, content=b"data: {nope\n\n"
            )
        return httpx.Response(200, json={"choices": "nope", "content": 5})

    async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as client:
        model = make(provider, "http://x", api_key=KEY, http_client=client)
        with pytest.raises(ProviderError):
            await answer(model, stream)


@pytest.mark.anyio
@PROVIDERS
@STREAM
async def test_a_key_echoed_in_an_error_body_is_redacted(provider: str, stream: bool) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(400, json={"error": {"message": f"bad key {KEY}", "key": KEY}})

    async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as client:
        model = make(provider, "http://x", api_key=KEY, http_client=client)
        with pytest.raises(ProviderError) as caught:
            await answer(model, stream)
    assert_no_key(caught.value)


@pytest.mark.anyio
@STREAM
async def test_a_key_cut_off_by_the_body_excerpt_is_redacted(stream: bool) -> None:
    """An in-band error whose echo of the key straddles the end of the kept excerpt."""

    def handler(request: httpx.Request) -> httpx.Response:
        # 200 with an error object: the provider's own reader raises, from the body
        padding = "x" * (BODY_EXCERPT_CHARS - len('{"error": {"message": "m", "pad": "') - 10)
        payload = {"error": {"message": "m", "pad": padding + KEY}}
        if stream:
            return httpx.Response(
                200,
                headers={"content-type": "text/event-stream"},
                content=f"data: {json.dumps(payload)}\n\n".encode(),
            )
        return httpx.Response(200, json=payload)

    async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as client:
        model = make("openai", "http://x", api_key=KEY, http_client=client)
        with pytest.raises(ProviderError) as caught:
            await answer(model, stream)
    assert KEY[:10] not in caught.value.body
    assert_no_key(caught.value)

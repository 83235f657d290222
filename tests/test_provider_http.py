"""Real HTTP behaviour against a server the tests start on 127.0.0.1: retries, dropped
and stalled streams, timeouts, connection reuse and release. Plus the retry policy."""

from __future__ import annotations

import json
import select
import socket
import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import anyio
import anyio.lowlevel
import httpx
import pytest

from advisorchain import (
    ChatRequest,
    ResponseCompleted,
    StreamInterruptedError,
    TextDelta,
    UserMessage,
)
from advisorchain.providers import (
    AnthropicChatModel,
    OpenAIChatModel,
    ProviderTimeoutError,
    ProviderUnavailableError,
    RateLimitError,
    RetryPolicy,
)
from advisorchain.providers.http import client as provider_http
from advisorchain.providers.http import retry as provider_retry

from provider_support import HTTPX_ABANDONED_GENERATORS

pytestmark = HTTPX_ABANDONED_GENERATORS

Action = Callable[["Handler"], None]


class Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.actions: list[Action] = []
        self.requests: list[dict[str, Any]] = []
        self.connections = 0
        self.hung_up = threading.Event()
        self.release = threading.Event()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: Server

    def setup(self) -> None:
        super().setup()
        self.server.connections += 1

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("content-length", 0)))
        self.server.requests.append({"path": self.path, "body": json.loads(body)})
        self.server.actions.pop(0)(self)

    # --- actions' building blocks ---

    def reply(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def start_stream(self) -> None:
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()

    def chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def end_stream(self) -> None:
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def drop(self) -> None:
        self.connection.shutdown(socket.SHUT_RDWR)
        self.close_connection = True

    def stall(self) -> None:
        """Wait until the test ends or the client hangs up (which is counted)."""
        while not self.server.release.wait(0.01):
            readable, _, _ = select.select([self.connection], [], [], 0)
            if readable and not self.connection.recv(1, socket.MSG_PEEK):
                self.server.hung_up.set()
                break
        self.close_connection = True


@pytest.fixture
def server() -> Iterator[Server]:
    srv = Server()
    thread = threading.Thread(target=srv.serve_forever, args=(0.01,), daemon=True)
    thread.start()
    yield srv
    srv.release.set()
    srv.shutdown()
    srv.server_close()
    thread.join(5)


@pytest.fixture
def waits(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """Record the retry waits instead of waiting."""
    recorded: list[float] = []

    async def sleep(seconds: float) -> None:
        recorded.append(seconds)
        await anyio.lowlevel.checkpoint()

    monkeypatch.setattr(provider_http, "_sleep", sleep)
    return recorded


def completion(text: str) -> dict[str, Any]:
    return {
        "id": "c1",
        "model": "m",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
        ],
        "usage": {"prompt_tokens": 3, "completion_tokens": 1},
    }


def openai_chunk(text: str | None = None, finish: str | None = None) -> bytes:
    delta = {"content": text} if text is not None else {}
    data = {"id": "c1", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    return f"data: {json.dumps(data)}\n\n".encode()


def full_stream(handler: Handler) -> None:
    handler.start_stream()
    for part in (
        openai_chunk("Hel"),
        openai_chunk("lo"),
        openai_chunk(None, "stop"),
        b"data: [DONE]\n\n",
    ):
        handler.chunk(part)
    handler.end_stream()


def openai(server: Server, **kwargs: Any) -> OpenAIChatModel:
    kwargs.setdefault("retry_policy", RetryPolicy(max_retries=2, backoff_base=0.001))
    return OpenAIChatModel("m", base_url=f"{server.url}/v1", **kwargs)


REQUEST = ChatRequest(messages=(UserMessage(content="Hi"),))


@pytest.mark.anyio
async def test_429_with_retry_after_then_success(server: Server, waits: list[float]) -> None:
    server.actions = [
        lambda h: h.reply(429, {"error": {"message": "slow down"}}, {"retry-after": "2"}),
        lambda h: h.reply(200, completion("Hello")),
    ]
    async with openai(server) as model:
        response = await model.call(REQUEST)
    assert response.text == "Hello"
    assert waits == [2.0]  # the server's wait, not the backoff
    assert len(server.requests) == 2
    assert server.requests[0]["path"] == "/v1/chat/completions"


@pytest.mark.anyio
async def test_stream_429_with_retry_after_ms_then_success(
    server: Server, waits: list[float]
) -> None:
    server.actions = [
        lambda h: h.reply(
            429, {"error": {"message": "slow down"}}, {"retry-after-ms": "20", "retry-after": "9"}
        ),
        full_stream,
    ]
    async with openai(server) as model:
        events = [e async for e in model.stream(REQUEST)]
    assert isinstance(events[-1], ResponseCompleted)
    assert events[-1].response.text == "Hello"
    assert waits == [0.02]


@pytest.mark.anyio
async def test_rate_limit_gives_up_when_the_wait_is_too_long(
    server: Server, waits: list[float]
) -> None:
    server.actions = [
        lambda h: h.reply(429, {"error": {"message": "quota"}}, {"retry-after": "3600"})
    ]
    async with openai(server) as model:
        with pytest.raises(RateLimitError, match="quota") as caught:
            await model.call(REQUEST)
    assert caught.value.retry_after == 3600
    assert waits == []


def dropped_openai(handler: Handler) -> None:
    handler.start_stream()
    handler.chunk(openai_chunk("Hel") + openai_chunk("lo"))
    handler.chunk(b'data: {"id": "c1", "choi')
    handler.drop()


def dropped_anthropic(handler: Handler) -> None:
    handler.start_stream()
    start = {"type": "message_start", "message": {"id": "m", "usage": {"input_tokens": 1}}}
    for text in ("Hel", "lo"):
        delta = {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "text_delta", "text": text},
        }
        if text == "Hel":
            handler.chunk(f"event: message_start\ndata: {json.dumps(start)}\n\n".encode())
        handler.chunk(f"event: content_block_delta\ndata: {json.dumps(delta)}\n\n".encode())
    handler.drop()


@pytest.mark.anyio
@pytest.mark.parametrize("provider", ["openai", "anthropic"])
async def test_connection_dropped_mid_stream(server: Server, provider: str) -> None:
    model: OpenAIChatModel | AnthropicChatModel
    if provider == "openai":
        server.actions = [dropped_openai]
        model = openai(server)
    else:
        server.actions = [dropped_anthropic]
        model = AnthropicChatModel("c", api_key="k", base_url=server.url)
    seen: list[str] = []
    async with model:
        with pytest.raises(StreamInterruptedError, match="broke off") as caught:
            async for event in model.stream(REQUEST):
                if isinstance(event, TextDelta):
                    seen.append(event.text)
    assert seen == ["Hel", "lo"]
    assert isinstance(caught.value.__cause__, httpx.TransportError)
    assert len(server.requests) == 1  # output was yielded: never retried


@pytest.mark.anyio
async def test_slow_server_hits_the_timeout(server: Server) -> None:
    server.actions = [Handler.stall, Handler.stall]
    policy = RetryPolicy(max_retries=1, backoff_base=0.001)
    async with openai(server, timeout=0.2, retry_policy=policy) as model:
        with pytest.raises(ProviderTimeoutError, match="timeout") as caught:
            await model.call(REQUEST)
    assert isinstance(caught.value, TimeoutError)
    assert len(server.requests) == 2  # retried once


def stalls_after_text(handler: Handler) -> None:
    handler.start_stream()
    handler.chunk(openai_chunk("Hel"))
    handler.stall()


@pytest.mark.anyio
async def test_stream_stalling_after_output_times_out_without_retry(server: Server) -> None:
    server.actions = [stalls_after_text]
    seen: list[str] = []
    async with openai(server, timeout=0.2) as model:
        with pytest.raises(StreamInterruptedError, match="ReadTimeout"):
            async for event in model.stream(REQUEST):
                if isinstance(event, TextDelta):
                    seen.append(event.text)
    assert seen == ["Hel"]
    assert len(server.requests) == 1


@pytest.mark.anyio
async def test_unreachable_server(waits: list[float]) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    async with OpenAIChatModel("m", base_url=f"http://127.0.0.1:{port}/v1") as model:
        with pytest.raises(ProviderUnavailableError, match="cannot reach 127.0.0.1"):
            await model.call(REQUEST)
    assert len(waits) == 2


@pytest.mark.anyio
async def test_finished_streams_return_their_connection_to_the_pool(server: Server) -> None:
    server.actions = [full_stream, full_stream, lambda h: h.reply(200, completion("ok"))]
    async with openai(server) as model:
        for _ in range(2):
            events = [e async for e in model.stream(REQUEST)]
            assert isinstance(events[-1], ResponseCompleted)
            assert events[-1].response.text == "Hello"
        assert (await model.call(REQUEST)).text == "ok"
    assert server.connections == 1


@pytest.mark.anyio
async def test_cancelled_stream_closes_its_connection(server: Server) -> None:
    server.actions = [stalls_after_text, lambda h: h.reply(200, completion("ok"))]
    responses: list[httpx.Response] = []  # strong references: garbage collection can't help

    async def keep(response: httpx.Response) -> None:
        responses.append(response)

    async with httpx.AsyncClient(event_hooks={"response": [keep]}) as client:
        model = openai(server, http_client=client)
        with anyio.CancelScope() as scope:
            async for event in model.stream(REQUEST):
                assert event == TextDelta("Hel")
                scope.cancel()
        assert scope.cancelled_caught
        assert responses[0].is_closed
        assert await anyio.to_thread.run_sync(server.hung_up.wait, 5)  # the server noticed
        assert (await model.call(REQUEST)).text == "ok"
    assert server.connections == 2


# --- the retry policy ------------------------------------------------------------------


def test_backoff_doubles_with_jitter_and_a_cap() -> None:
    policy = RetryPolicy(max_retries=5, backoff_base=1.0, backoff_max=5.0, jitter=0.25)
    for attempt, full in enumerate([1.0, 2.0, 4.0, 5.0, 5.0]):
        for _ in range(20):
            delay = policy.delay(attempt)
            assert delay is not None and full * 0.75 <= delay <= full
    assert policy.delay(5) is None
    assert RetryPolicy(max_retries=0).delay(0) is None


def test_retry_after_is_honoured_up_to_the_limit() -> None:
    policy = RetryPolicy(max_retries=2, max_retry_after=30)
    assert policy.delay(0, 12.5) == 12.5
    assert policy.delay(1, 0) == 0
    assert policy.delay(0, 31) is None
    assert policy.delay(2, 1) is None


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"retry-after": "3"}, 3.0),
        ({"retry-after": "1.5"}, 1.5),
        ({"retry-after-ms": "250", "retry-after": "3"}, 0.25),
        ({"retry-after-ms": "junk", "retry-after": "3"}, 3.0),
        ({"retry-after": "-4"}, 0.0),
        ({"retry-after": "soon"}, None),
        ({}, None),
    ],
)
def test_retry_after_headers(headers: dict[str, str], expected: float | None) -> None:
    assert provider_retry.retry_after(httpx.Headers(headers)) == expected


def test_retry_after_http_date() -> None:
    when = format_datetime(datetime.now(UTC) + timedelta(seconds=30), usegmt=True)
    wait = provider_retry.retry_after(httpx.Headers({"retry-after": when}))
    assert wait is not None and 25 <= wait <= 30


@pytest.mark.parametrize(
    "value",
    [
        "Wed, 21 Oct 2015 07:28:00 -0000",  # RFC 2822's "unknown zone": a naive datetime
        "Wed, 21 Oct 2015 07:28:00",
        "Wed Oct 21 07:28:00 2015",
        "Wednesday, 21-Oct-15 07:28:00 GMT",
        "Wed, 21 Oct 2015 07:28:00 GMT",
    ],
)
def test_retry_after_past_http_dates_mean_no_wait(value: str) -> None:
    assert provider_retry.retry_after(httpx.Headers({"retry-after": value})) == 0.0


def test_retry_after_future_date_without_zone_is_read_as_utc() -> None:
    when = (datetime.now(UTC) + timedelta(seconds=30)).strftime("%a, %d %b %Y %H:%M:%S -0000")
    wait = provider_retry.retry_after(httpx.Headers({"retry-after": when}))
    assert wait is not None and 25 <= wait <= 30


@pytest.mark.parametrize(
    "value",
    [
        "Wed, 32 Oct 2015 07:28:00 GMT",
        "Wed, 21 Oct 99999 07:28:00 GMT",
        "Mon, 21 Oct 2015 25:28:00 GMT",
        "Wed, 21 Oct",
        "\x00",
        "",
        "nan",
        "-inf",
    ],
)
def test_retry_after_garbage_is_ignored(value: str) -> None:
    wait = provider_retry.retry_after(httpx.Headers({"retry-after": value}))
    assert wait is None or wait == 0.0


@pytest.mark.anyio
@pytest.mark.parametrize("stream", [False, True])
async def test_429_with_a_zoneless_http_date_is_retried(
    server: Server, waits: list[float], stream: bool
) -> None:
    date = {"retry-after": "Wed, 21 Oct 2015 07:28:00 -0000"}
    server.actions = [
        lambda h: h.reply(429, {"error": {"message": "slow down"}}, date),
        full_stream if stream else (lambda h: h.reply(200, completion("Hello"))),
    ]
    async with openai(server) as model:
        if stream:
            events = [e async for e in model.stream(REQUEST)]
            assert isinstance(events[-1], ResponseCompleted)
            assert events[-1].response.text == "Hello"
        else:
            assert (await model.call(REQUEST)).text == "Hello"
    assert waits == [0.0]

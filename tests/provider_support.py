"""Helpers shared by the provider tests: recorded fixtures and a recording mock transport."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Iterable
from pathlib import Path
from typing import Any

import httpx
import pytest

from advisorchain import tool
from advisorchain.providers import RetryPolicy

FIXTURES = Path(__file__).parent / "fixtures"

HTTPX_ABANDONED_GENERATORS = pytest.mark.filterwarnings(
    r"ignore:Exception ignored in. <async_generator object "
    r"(Response\.aiter_|BoundAsyncStream\.|AsyncResponseStream\.|PoolByteStream\.|"
    r"HTTP11ConnectionByteStream\.):pytest.PytestUnraisableExceptionWarning"
)
"""httpx reads bodies through nested async generators that it cannot close when a stream
is abandoned (error, cancellation): trio then warns as they are garbage collected, though
the response itself is closed. Upstream: encode/httpx#3686. Only those warnings are ignored."""


@tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


@tool
def get_time(tz: str) -> str:
    """The time in a time zone."""
    return f"12:00 in {tz}"


FAST_RETRY = RetryPolicy(max_retries=2, backoff_base=0.001, backoff_max=0.002)
"""Retries that cost nothing in tests."""


def fixture(name: str) -> bytes:
    """The bytes of a recorded fixture."""
    return (FIXTURES / name).read_bytes()


def fixture_json(name: str) -> dict[str, Any]:
    """A recorded JSON fixture."""
    data: dict[str, Any] = json.loads(fixture(name))
    return data


def split(data: bytes, *points: int) -> list[bytes]:
    """`data` cut at `points`."""
    bounds = [0, *points, len(data)]
    return [data[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]


def cuts(data: bytes, steps: tuple[int, ...] = (1, 7, 64)) -> list[list[bytes]]:
    """`data` cut every `step` bytes from each offset below `step`: every byte boundary is
    a cut in at least one replay per step (byte by byte for step 1), in varied company."""
    return [
        split(data, *range(offset or step, len(data), step))
        for step in steps
        for offset in range(step)
    ]


class ChunkStream(httpx.AsyncByteStream):
    """A response body delivered in the given chunks; remembers whether it was closed.

    It iterates with a plain iterator, not an async generator, so abandoning it is silent.
    """

    def __init__(self, chunks: Iterable[bytes]) -> None:
        self.chunks = list(chunks)
        self.sent = 0
        self.closed = False

    def __aiter__(self) -> AsyncIterator[bytes]:
        return self

    async def __anext__(self) -> bytes:
        if self.sent >= len(self.chunks):
            raise StopAsyncIteration
        self.sent += 1
        return self.chunks[self.sent - 1]

    async def aclose(self) -> None:
        self.closed = True


def sse_response(chunks: bytes | Iterable[bytes], status: int = 200) -> httpx.Response:
    """A streamed `text/event-stream` response."""
    body = ChunkStream([chunks] if isinstance(chunks, bytes) else chunks)
    return httpx.Response(status, headers={"content-type": "text/event-stream"}, stream=body)


Reply = httpx.Response | Callable[[httpx.Request], httpx.Response]


class Recorder:
    """A `MockTransport` handler: answers with `replies` in turn and records every request."""

    def __init__(self, *replies: Reply) -> None:
        self.replies = list(replies)
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        if not self.replies:
            raise AssertionError(f"unexpected request #{len(self.requests)}")
        reply = self.replies.pop(0)
        return reply(request) if callable(reply) else reply

    @property
    def bodies(self) -> list[dict[str, Any]]:
        """The JSON bodies of the requests received."""
        return [json.loads(r.content) for r in self.requests]

    def client(self) -> httpx.AsyncClient:
        """A client whose requests this recorder answers."""
        return httpx.AsyncClient(transport=httpx.MockTransport(self))

"""`HTTPChatModel`: what every provider over HTTP shares, around its own wire format."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from types import TracebackType
from typing import Any, Protocol

import anyio
import httpx

from ..core.errors import AdvisorChainError
from ..core.events import ModelDelta, ResponseCompleted, StreamEvent
from ..core.request import ChatRequest
from ..core.response import ChatResponse
from ..core.streams import closing_stream
from .errors import InvalidResponseError, ProviderError
from .http import (
    PARSE_ERRORS,
    HTTPClient,
    RetryPolicy,
    Secret,
    api_key_from_env,
    close_response,
    json_excerpt,
    redact_error,
    sse_events,
)

END_OF_STREAM_GRACE = 0.25
"""Seconds a stream's body may take to end after its end marker (`data: [DONE]`,
`message_stop`). Reading it to the end lets the connection be reused; a server that
keeps the connection open past this is cut off, so the answer never waits on it."""


async def _drain(events: AsyncIterator[object]) -> None:
    with anyio.move_on_after(END_OF_STREAM_GRACE):
        try:
            async for _ in events:
                pass
        except AdvisorChainError:
            pass  # the answer is complete: what follows its end marker does not matter


class StreamState(Protocol):
    """A provider's reading of one SSE stream: events in, deltas out, a response at the end."""

    @property
    def done(self) -> bool:
        """Whether the stream's end marker arrived: nothing after it is read."""
        ...

    def receive(self, data: str, event: str = "message") -> list[ModelDelta]:
        """The deltas in one event's data (`event`: the SSE event type)."""
        ...

    def response(self) -> ChatResponse:
        """The complete response (raises `StreamInterruptedError` if the stream was cut)."""
        ...


class HTTPChatModel:
    """The shared part of a provider: HTTP client, API key, `call` and `stream`.

    A subclass states its wire format: `endpoint`, `_body`, `_auth_headers`, `_parse`
    (a JSON response into a `ChatResponse`) and `_stream_state` (a reader of its SSE
    events). Retries, typed errors, key handling and closing responses are here.
    """

    provider_name = "http"
    endpoint = ""

    def __init__(
        self,
        model: str,
        *,
        base_url: str,
        api_key: str | None,
        api_key_env: str | None,
        key_required: bool,
        http_client: httpx.AsyncClient | None,
        timeout: float | httpx.Timeout | None,
        max_retries: int,
        retry_policy: RetryPolicy | None,
        headers: Mapping[str, str] | None,
    ) -> None:
        self.model_name = model
        self.base_url = base_url.rstrip("/")
        self._api_key = Secret(api_key) if api_key else None
        self._api_key_env = api_key_env
        self._key_required = key_required
        self._headers = dict(headers or {})
        self._http = HTTPClient(
            provider=self.provider_name,
            http_client=http_client,
            timeout=timeout,
            retry=retry_policy or RetryPolicy(max_retries=max_retries),
        )

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model_name={self.model_name!r}, base_url={self.base_url!r})"

    async def __aenter__(self) -> HTTPChatModel:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the HTTP client this model created (an injected one is left open)."""
        await self._http.aclose()

    def _key(self) -> str | None:
        if self._api_key is None and self._api_key_env:
            self._api_key = api_key_from_env(
                self._api_key_env, provider=self.provider_name, required=self._key_required
            )
        return self._api_key.reveal() if self._api_key else None

    def _request_headers(self, key: str | None) -> dict[str, str]:
        return {**self._headers, **self._auth_headers(key)}

    def _auth_headers(self, key: str | None) -> dict[str, str]:
        raise NotImplementedError

    def _body(self, request: ChatRequest, *, stream: bool) -> dict[str, Any]:
        raise NotImplementedError

    def _parse(self, payload: Any) -> ChatResponse:
        raise NotImplementedError

    def _stream_state(self) -> StreamState:
        raise NotImplementedError

    async def call(self, request: ChatRequest) -> ChatResponse:
        """Answer `request` with one HTTP request."""
        key = self._key()
        payload = await self._http.post_json(
            f"{self.base_url}{self.endpoint}",
            self._body(request, stream=False),
            headers=self._request_headers(key),
            secret=key,
        )
        try:
            return self._parse(payload)
        except ProviderError as exc:
            redact_error(exc, key)  # an in-band error may quote the request
            raise
        except PARSE_ERRORS as exc:
            error = InvalidResponseError(
                f"{self.provider_name}: unexpected response shape ({type(exc).__name__}: {exc})",
                status_code=200,
                body=json_excerpt(payload),
                provider=self.provider_name,
            )
            if not (key and key in f"{exc!s}{exc!r}"):
                raise redact_error(error, key) from exc
        raise redact_error(error, key)  # outside `except`: no context that quotes the key

    async def stream(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        """Answer `request` as a stream: text and tool-call deltas, then the response."""
        key = self._key()
        response = await self._http.send(
            f"{self.base_url}{self.endpoint}",
            self._body(request, stream=True),
            headers=self._request_headers(key),
            secret=key,
            stream=True,
        )
        state = self._stream_state()
        try:
            async with closing_stream(sse_events(response, provider=self.provider_name)) as events:
                async for event in events:
                    for delta in state.receive(event.data, event.event):
                        yield delta
                    if state.done:
                        await _drain(events)
                        break
            completed = ResponseCompleted(state.response())
        except AdvisorChainError as exc:
            redact_error(exc, key)  # an error event may quote the request
            raise
        finally:
            await close_response(response)
        yield completed

"""`HTTPChatModel`: what every provider over HTTP shares, around its own wire format."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping
from functools import partial
from types import TracebackType
from typing import Any, Protocol, TypeVar

import anyio
import httpx

from ..core._streams import closing_stream
from ..core.errors import AdvisorChainError, StreamInterruptedError
from ..core.events import ModelDelta, ResponseCompleted, StreamEvent
from ..core.request import ChatRequest
from ..core.response import ChatResponse
from .errors import InvalidResponseError, ProviderError, ProviderStreamError
from .http import (
    PARSE_ERRORS,
    HTTPClient,
    RetryPolicy,
    Secret,
    api_key_from_env,
    clean_api_key,
    close_response,
    json_excerpt,
    redact,
    redact_error,
    safe_cause,
    sse_events,
)

_T = TypeVar("_T")

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

    The API key is stripped of surrounding whitespace at construction (one read from the
    environment, at the first call); a key with a control or non-ASCII character inside
    raises `InvalidAPIKeyError`. Every failure raises a `ProviderError` (a broken stream
    a `ProviderStreamError`), and none shows the key.
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
        self._api_key: Secret | None = clean_api_key(api_key, provider=self.provider_name)
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
        body = self._body(request, stream=False)
        try:
            payload = await self._http.post_json(
                f"{self.base_url}{self.endpoint}",
                body,
                headers=self._request_headers(key),
                secret=key,
            )
        except ProviderError as exc:
            redact_error(exc, key)
            raise
        try:
            return self._parse(payload)
        except ProviderError as exc:
            redact_error(exc, key)  # an in-band error may quote the request
            raise
        except PARSE_ERRORS as exc:
            cause: BaseException = exc
        failure = InvalidResponseError(
            f"{self.provider_name}: unexpected response shape "
            f"({type(cause).__name__}: {redact(str(cause), key)})",
            status_code=200,
            body=redact(json_excerpt(payload), key),
            provider=self.provider_name,
        )
        raise redact_error(failure, key) from safe_cause(cause, key)

    async def stream(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        """Answer `request` as a stream: text and tool-call deltas, then the response."""
        key = self._key()
        body = self._body(request, stream=True)
        try:
            response = await self._http.send(
                f"{self.base_url}{self.endpoint}",
                body,
                headers=self._request_headers(key),
                secret=key,
                stream=True,
            )
        except ProviderError as exc:
            redact_error(exc, key)
            raise
        state = self._stream_state()
        try:
            source = sse_events(response, provider=self.provider_name, secret=key)
            async with closing_stream(source) as events:
                async for event in events:
                    for delta in self._read(partial(state.receive, event.data, event.event), key):
                        yield delta
                    if state.done:
                        await _drain(events)
                        break
            completed = ResponseCompleted(self._read(state.response, key))
        except AdvisorChainError as exc:
            redact_error(exc, key)  # an error event may quote the request
            raise
        finally:
            await close_response(response)
        yield completed

    def _read(self, step: Callable[[], _T], key: str | None) -> _T:
        """`step()`: reading the stream, whose failures all become `ProviderError`s
        (`ProviderStreamError` for what is not one already) that do not show `key`."""
        try:
            return step()
        except ProviderError as exc:
            redact_error(exc, key)
            raise
        except PARSE_ERRORS as exc:
            cause: BaseException = exc
        except StreamInterruptedError as exc:
            cause = exc
        detail = redact(str(cause), key) or type(cause).__name__
        if not isinstance(cause, StreamInterruptedError):
            detail = f"unexpected stream data ({type(cause).__name__}: {detail})"
        failure = ProviderStreamError(
            f"{self.provider_name}: {detail}", provider=self.provider_name
        )
        raise failure from safe_cause(cause, key)

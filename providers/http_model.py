"""`HTTPChatModel`: a `WireFormat` plus what every provider over HTTP shares."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from types import TracebackType
from typing import Any, Self, Unpack
from urllib.parse import urlsplit, urlunsplit

import anyio
import httpx

from ..core.errors import AdvisorChainError, StreamInterruptedError
from ..core.events import ResponseCompleted, StreamEvent
from ..core.options import NativeSearchVariant
from ..core.request import ChatRequest
from ..core.response import ChatResponse
from ..core.scrub import safe_str
from .errors import BadRequestError, InvalidResponseError, ProviderError, ProviderStreamError
from .http.client import HTTPClient
from .http.connection import Connection, ConnectionOptions
from .http.json_values import PARSE_ERRORS, json_excerpt
from .http.secrets import (
    Secret,
    Secrets,
    api_key_from_env,
    clean_api_key,
    redact,
    redact_error,
    safe_cause,
)
from .sse import SSEDecoder
from .wire import StreamReader, WireCall, WireFormat

_STREAM_FAILURES: tuple[type[Exception], ...] = (*PARSE_ERRORS, StreamInterruptedError)

END_OF_STREAM_GRACE = 0.25
"""Seconds a stream's body may take to end after its end marker (`data: [DONE]`,
`message_stop`). Reading it to the end lets the connection be reused; a server that
keeps the connection open past this is cut off, so the answer never waits on it."""


_BODY_FAILURES: tuple[type[Exception], ...] = (*_STREAM_FAILURES, RecursionError)
_HEAD_BYTES = 4096
"""How much of a streamed body is kept, to read when it turns out not to be a stream (an
in-band JSON error) or to show (an HTML page)."""


def _not_an_event_stream(response: httpx.Response, head: bytes | bytearray) -> str | None:
    """The start of the body, as text, if the response is not an event stream: its
    content type says another, or (without one) no event field starts its body."""
    content_type = response.headers.get("content-type", "").lower()
    text = bytes(head).decode("utf-8", errors="replace")
    if content_type:
        if "event-stream" in content_type:
            return None
    elif not text.strip() or any(f in text for f in ("data:", "event:", "id:", "retry:")):
        return None
    return " ".join(text.split())


async def _drain(chunks: AsyncIterator[bytes]) -> None:
    with anyio.move_on_after(END_OF_STREAM_GRACE):
        try:
            async for _ in chunks:
                pass
        except (httpx.HTTPError, httpx.StreamError):
            pass  # the answer is complete: what follows its end marker does not matter


StreamState = StreamReader
"""The former name of `StreamReader` (kept for code written against 0.1)."""


class HTTPChatModel:
    """A chat model over HTTP: one `WireFormat` (`wire`) plus what every provider shares.

    `HTTPChatModel(model, wire=MyWire(), base_url=...)` is a complete provider: the wire
    format builds each request and reads each answer (see `providers/wire.py` for the
    control flow); the client, retries that honour `Retry-After` (never once a stream's
    output started), typed errors, key handling and closing responses on cancellation
    are here. `OpenAIChatModel` and `AnthropicChatModel` are this class with their wire
    format and defaults filled in.

    How it reaches the API is one `Connection` (`connection=`, and/or its fields as
    keywords, `ConnectionOptions`, applied over it), resolved against the wire format's
    official API (`WireFormat.official`; see `providers/http/connection.py`): a wire format
    that names one needs no `base_url`. The API key is `api_key`, else the variable named
    by `api_key_env`, read at the first call (a missing one raises `AuthenticationError`
    naming the variable when the key is required). It is stripped of surrounding
    whitespace; a key with a control or non-ASCII character inside raises
    `InvalidAPIKeyError`. `headers` are added to every
    request (the wire format's own headers, authentication included, win over them). An
    injected `http_client` is the caller's to close; one created here (with `timeout`)
    is closed by `aclose()` or `async with`.
    Every failure raises a `ProviderError` (a broken stream a `ProviderStreamError`), and
    none shows the key.
    """

    def __init__(
        self,
        model: str,
        *,
        wire: WireFormat,
        connection: Connection | None = None,
        **options: Unpack[ConnectionOptions],
    ) -> None:
        if not isinstance(model, str) or not model:
            raise TypeError(f"model must be the model's name (a string), not {model!r:.80}")
        resolved = Connection.of(connection, options).for_api(wire.official)
        assert resolved.base_url is not None  # for_api decides it
        self.wire = wire
        self.provider_name: str = wire.provider
        self.model_name = model
        self.base_url = resolved.base_url.rstrip("/")
        self._api_key: Secret | None = clean_api_key(resolved.api_key, provider=self.provider_name)
        self._api_key_env = resolved.api_key_env
        self._key_required = bool(resolved.key_required)
        self._headers = dict(resolved.headers or {})
        self._http = HTTPClient(
            provider=self.provider_name,
            http_client=resolved.http_client,
            timeout=resolved.timeout,
            retry=resolved.retry,
            error_detail=wire.error_detail,
            error_type=wire.error_type,
        )

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(model_name={self.model_name!r}, "
            f"base_url={_without_password(self.base_url)!r})"
        )

    def _secrets(self, key: str | None) -> tuple[str, ...]:
        """What no error may show: the key, the base URL's password, the header values."""
        password = urlsplit(self.base_url).password
        return tuple(s for s in (key, password, *self._headers.values()) if s)

    async def __aenter__(self) -> Self:
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

    def supports_native_tool_search(self, variant: NativeSearchVariant) -> bool:
        """Whether the wire format writes `ChatOptions.native_tool_search` of `variant`."""
        return variant in self.wire.native_tool_search

    def _key(self) -> str | None:
        if self._api_key is None and self._api_key_env:
            self._api_key = api_key_from_env(
                self._api_key_env, provider=self.provider_name, required=self._key_required
            )
        return self._api_key.reveal() if self._api_key else None

    def _prepare(
        self, request: ChatRequest, *, stream: bool
    ) -> tuple[str, dict[str, str], dict[str, Any], str | None]:
        """The URL, headers, body and key of one request, built by the wire format."""
        search = request.options.native_tool_search
        if search is not None and not self.supports_native_tool_search(search.variant):
            raise BadRequestError(
                f"{self.provider_name}: this provider has no {search.variant!r} tool search "
                "(ChatOptions.native_tool_search); use ToolSearchAdvisor's own search",
                provider=self.provider_name,
            )
        key = self._key()
        call = WireCall(
            request=request,
            model=request.options.model or self.model_name,
            base_url=self.base_url,
            stream=stream,
        )
        headers = {**self._headers, **self.wire.headers(call, key)}
        return self.wire.url(call), headers, self.wire.body(call), key

    async def call(self, request: ChatRequest) -> ChatResponse:
        """Answer `request` with one HTTP request."""
        url, headers, body, api_key = self._prepare(request, stream=False)
        key = self._secrets(api_key)  # what no error may show
        posting = self._http.post_json(url, body, headers=headers, secret=key)
        del body  # held until it is encoded, not while the answer is awaited (memory)
        try:
            payload = await posting
        except ProviderError as exc:
            redact_error(exc, key)
            raise
        try:
            return self.wire.parse(payload)
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
        """Answer `request` as a stream: text and tool-call deltas, then the response.

        The body's bytes go through one `SSEDecoder` to the wire format's reader, in
        this one generator (no generator per layer: at a thousand concurrent streams
        each layer's cost per event shows)."""
        url, headers, body, api_key = self._prepare(request, stream=True)
        key = self._secrets(api_key)  # what no error may show
        sending = self._http.send(url, body, headers=headers, secret=key, stream=True)
        del url, headers, body  # held until encoded, not while the answer is awaited (memory)
        try:
            response = await sending
        except ProviderError as exc:
            redact_error(exc, key)
            raise
        del sending
        state = self.wire.stream_reader()
        receive = state.receive
        decoder = SSEDecoder()
        chunks = response.aiter_bytes()
        head = bytearray()  # the body's start, to say what came when it is not a stream
        try:
            broken: BaseException | None = None
            failure: BaseException | None = None  # what `receive` raised but a ProviderError
            try:
                async for chunk in chunks:
                    if len(head) < _HEAD_BYTES:
                        head += chunk[: _HEAD_BYTES - len(head)]
                    for kind, data, _, _ in decoder.feed_fields(chunk):
                        try:  # `_read`, inlined: this runs for every event
                            deltas = receive(data, kind)
                        except ProviderError:
                            raise  # redacted below
                        except _STREAM_FAILURES as exc:
                            failure = exc
                            break
                        for delta in deltas:
                            yield delta
                        if state.done:
                            break
                    if failure is not None or state.done:
                        break
                else:
                    for kind, data, _, _ in decoder.close_fields():
                        try:
                            deltas = receive(data, kind)
                        except ProviderError:
                            raise  # redacted below
                        except _STREAM_FAILURES as exc:
                            failure = exc
                            break
                        for delta in deltas:
                            yield delta
                        if state.done:
                            break
            except (httpx.HTTPError, httpx.StreamError) as exc:
                broken = exc
            if failure is None and broken is None:
                if state.done:
                    await _drain(chunks)
                try:
                    completed = ResponseCompleted(state.response())
                except ProviderError:
                    raise  # redacted below
                except _STREAM_FAILURES as exc:
                    failure = exc
            if failure is not None:  # raised here, outside `except`, to chain only a safe cause
                raise self._failure(failure, key, response, head) from safe_cause(failure, key)
            if broken is not None:
                raise ProviderStreamError(
                    f"{self.provider_name}: the stream broke off ({type(broken).__name__})",
                    provider=self.provider_name,
                ) from safe_cause(broken, key)
        except AdvisorChainError as exc:
            redact_error(exc, key)  # an error event may quote the request
            raise
        finally:
            with anyio.CancelScope(shield=True):  # closed even while being cancelled
                await chunks.aclose()  # type: ignore[attr-defined]
                await response.aclose()
        yield completed

    def _in_band_error(self, head: bytes | bytearray) -> ProviderError | None:
        """The API's own error, if the (whole) body is one of its JSON error bodies."""
        if len(head) >= _HEAD_BYTES:
            return None  # cut: not the whole body
        try:
            payload = json.loads(bytes(head))
            self.wire.parse(payload)
        except ProviderError as exc:
            return exc
        except _BODY_FAILURES:
            return None
        return None

    def _failure(
        self,
        cause: BaseException,
        key: Secrets,
        response: httpx.Response | None = None,
        head: bytes | bytearray = b"",
    ) -> ProviderError:
        """One error for a stream that could not be read, saying why once: the
        provider's name leads its message once (a wire reader's own prefix is dropped).
        A body that is not an event stream at all is read as the API's JSON error when
        it is one (the typed error the call path raises: `RateLimitError`, ...), else
        named as such with its content type and start (`body`): an HTML page with
        status 200 from a proxy."""
        name = self.provider_name
        if response is not None:
            excerpt = _not_an_event_stream(response, head)
            if excerpt is not None:
                in_band = self._in_band_error(head)
                if in_band is not None:
                    return in_band
                content_type = response.headers.get("content-type") or "no content type"
                excerpt = redact(excerpt, key)
                return ProviderStreamError(
                    f"{name}: the response is not an event stream ({content_type}): "
                    f"{excerpt[:120]!r}",
                    status_code=response.status_code,
                    body=excerpt,
                    provider=name,
                )
        detail = redact(safe_str(cause), key) or type(cause).__name__
        for prefix in {f"{name}: ", f"{self.wire.provider}: "}:
            detail = detail.removeprefix(prefix)
        if not isinstance(cause, StreamInterruptedError):
            detail = f"unexpected stream data ({type(cause).__name__}: {detail})"
        return ProviderStreamError(f"{name}: {detail}", provider=name)


def _without_password(url: str) -> str:
    """`url` with the password of its user information masked (for reprs)."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=f"{parts.username}:***@{host}"))


__all__ = ["END_OF_STREAM_GRACE", "HTTPChatModel", "StreamState"]

"""The provider seam: one `WireFormat` per HTTP API, everything else shared.

A wire format only translates. For one request it builds the URL, the headers and the
JSON body (`url`, `headers`, `body`, each given a `WireCall`), it reads a complete JSON
response into a `ChatResponse` (`parse`), and it reads a stream's server-sent events into
core deltas (`stream_reader`, a fresh `StreamReader` per stream). `HTTPChatModel`
(`providers/http_model.py`) runs it: the HTTP client, retries honouring `Retry-After`,
typed errors, API keys (read once, never in reprs, errors or logs) and closing responses
on cancellation are written once, there.

Control flow of one `call`: `url`, `headers`, `body` -> POST (retried on 408/409/429/5xx
and connection errors) -> a failed status becomes a typed `ProviderError` (the message
from `error_detail`; the class from `error_type`, else from the status) ->
`parse(payload)`. A `ProviderError` raised by `parse` (an in-band error) passes through;
any of `PARSE_ERRORS` (a missing key, a wrong type) becomes an `InvalidResponseError`.
One `stream`: the same request with `call.stream` true -> each SSE event goes to
`reader.receive(data, event)`, whose deltas are yielded; once `reader.done` the rest of
the body is drained briefly and ignored; then `reader.response()` is the
`ResponseCompleted`. What `receive` or `response` raise (but a `ProviderError`) becomes
a `ProviderStreamError`. Every error has the API key masked.

See docs/providers.md for a complete small provider.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from ..core.errors import StreamInterruptedError
from ..core.events import ModelDelta
from ..core.request import ChatRequest
from ..core.response import ChatResponse
from .errors import ProviderError
from .http.connection import OfficialAPI
from .http.error_mapping import error_for_status, error_message, error_type_for_code
from .http.json_values import PARSE_ERRORS, json_dumps, json_excerpt, json_loads, plain, token_count

__all__ = [
    "PARSE_ERRORS",
    "StreamReader",
    "WireCall",
    "WireFormat",
    "error_for_status",
    "error_message",
    "error_type_for_code",
    "event_object",
    "json_dumps",
    "json_excerpt",
    "json_loads",
    "merge_extra",
    "plain",
    "token_count",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class WireCall:
    """What a wire format builds one HTTP request from.

    `model` is the model to ask (`request.options.model`, else the chat model's
    `model_name`), `base_url` the chat model's base URL without a trailing slash,
    `stream` whether the answer is to be streamed. The API key is not here: only
    `WireFormat.headers` receives it, so it cannot end up in a URL or a body by accident.
    """

    request: ChatRequest
    model: str
    base_url: str
    stream: bool


class StreamReader(Protocol):
    """A wire format's reading of one SSE stream: events in, deltas out, a response at
    the end. One reader per stream; `HTTPChatModel` creates it with
    `WireFormat.stream_reader()`."""

    @property
    def done(self) -> bool:
        """Whether the stream's end marker arrived: nothing after it is read. A format
        without an end marker keeps this false; the stream then ends with the body."""
        ...

    def receive(self, data: str, event: str = "message") -> list[ModelDelta]:
        """The deltas in one event's data (`event`: the SSE event type). Raise a
        `ProviderError` for an in-band error, `StreamInterruptedError` (or any of
        `PARSE_ERRORS`) for data that cannot be read."""
        ...

    def response(self) -> ChatResponse:
        """The complete response, after the last event (raise `StreamInterruptedError`
        if the stream ended before it was complete)."""
        ...


class WireFormat:
    """One HTTP API's wire format. Subclass it and implement `body`, `parse` and
    `stream_reader`; override `url` and `headers` when the defaults do not fit.

    `provider` names the provider in error messages, logs and `provider_data`. The
    defaults: `url` is `{base_url}{endpoint}` for both paths; `headers` sends the key as
    `Authorization: Bearer <key>` (nothing without a key); `error_detail` reads the
    human message of an error body in the common shapes (`{"error": {"message": ...}}`,
    `{"message": ...}`, `{"detail": ...}`). `native_tool_search` names the tool-search
    variants the format writes for `ChatOptions.native_tool_search` (none by default:
    `HTTPChatModel` then refuses that option before sending). `official` is the
    provider's own API (its URL and key variable, `OfficialAPI`), which the chat model's
    `Connection` defaults to and which requires a key; `None` (the default): every chat
    model of this format is given a `base_url`.

    A wire format holds only its own settings (say, which body field carries
    `max_tokens`); it is shared by every request of its model and must not keep
    per-request state outside its `StreamReader`.
    """

    provider: str = "http"
    endpoint: str = ""
    native_tool_search: frozenset[str] = frozenset()
    official: OfficialAPI | None = None

    def url(self, call: WireCall) -> str:
        """The URL to POST `call` to (the model may be part of the path)."""
        return f"{call.base_url}{self.endpoint}"

    def headers(self, call: WireCall, api_key: str | None) -> dict[str, str]:
        """The request's own headers (authentication, API version); `content-type:
        application/json` is added when missing; these win over the chat model's `headers`."""
        return {"Authorization": f"Bearer {api_key}"} if api_key else {}

    def body(self, call: WireCall) -> dict[str, Any]:
        """The JSON body for `call.request` (and `call.stream`)."""
        raise NotImplementedError

    def parse(self, payload: Any) -> ChatResponse:
        """A complete JSON response as a `ChatResponse`."""
        raise NotImplementedError

    def stream_reader(self) -> StreamReader:
        """A fresh reader for one stream's events."""
        raise NotImplementedError

    def error_detail(self, payload: Any) -> str | None:
        """The human message of a failed response's JSON body, if it has one."""
        return error_message(payload)

    def error_type(self, status: int, payload: Any) -> type[ProviderError] | None:
        """The `ProviderError` subclass for a failed response, where its body tells the
        kind of failure better than its status (Gemini answers a bad API key with 400
        `INVALID_ARGUMENT` and the reason `API_KEY_INVALID`). `payload` is the parsed
        JSON body, with the API key masked (`None` if it is not JSON). `None`, the
        default, lets the status decide (`error_for_status`). Whether the request is
        retried still follows the status and the `x-should-retry` header, except that an
        `OutputSchemaRefusedError` named here is never retried.

        Used on both paths (a stream's failed status too); a wire format can also use it
        for its in-band errors, so both read an error body the same way."""
        return None

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


def merge_extra(body: dict[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    """`body` with `ChatOptions.extra` merged in last (it wins), ready for JSON."""
    if extra:
        body.update(plain(extra))
    return body


def event_object(data: str, event: str, *, provider: str) -> dict[str, Any]:
    """One server-sent event's `data` as the JSON object a `StreamReader` reads.

    Data that is not JSON raises `StreamInterruptedError`, except in an `error` event
    (`event == "error"`), whose text is then the provider's own word: a `ProviderError`
    quoting its first 200 characters. JSON that is not an object raises
    `StreamInterruptedError`. Reading the error an object carries is the caller's."""
    try:
        payload = json_loads(data)
    except (ValueError, RecursionError) as exc:
        if event == "error":
            raise ProviderError(
                f"{provider}: error event: {data[:200]}", body=data, provider=provider
            ) from None
        raise StreamInterruptedError(f"{provider}: malformed JSON in the stream: {exc}") from exc
    if not isinstance(payload, dict):
        raise StreamInterruptedError(f"{provider}: a stream event is not a JSON object")
    return payload

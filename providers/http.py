"""What the HTTP providers share: the client, retries, error mapping and API keys.

Retries cover only getting a successful response: a 408, 409, 429 or 5xx status, a
connection error or a timeout is retried with exponential backoff and jitter, waiting
exactly as long as `Retry-After` / `retry-after-ms` ask when the provider says. Once a
stream's response is open nothing is retried, so no output is ever repeated.

Request bodies are UTF-8 JSON, with lone surrogates sent as U+FFFD (`json_body`). Errors
raised while reading a response have the API key masked (`redact_error`).
"""

from __future__ import annotations

import json
import logging
import os
import random
import re
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from types import MappingProxyType
from typing import Any, Literal, TypeAlias, TypeVar, overload

import anyio
import httpx

from .errors import (
    BODY_EXCERPT_CHARS,
    AuthenticationError,
    BadRequestError,
    InvalidAPIKeyError,
    InvalidResponseError,
    OutputSchemaRefusedError,
    ProviderError,
    ProviderRequestError,
    ProviderStreamError,
    ProviderTimeoutError,
    ProviderUnavailableError,
    RateLimitError,
)
from .sse import ServerSentEvent, SSEDecoder

logger = logging.getLogger("advisorchain.providers")

DEFAULT_TIMEOUT = httpx.Timeout(600.0, connect=10.0)
"""Timeout of the client a provider creates itself: long answers can take minutes."""

MAX_CACHED_URLS = 64
"""Parsed request URLs an `HTTPClient` keeps (one per model and path, as a rule)."""

_RETRY_STATUSES = frozenset({408, 409, 429})
_SENT: Mapping[str, Any] = MappingProxyType({})  # what `send` keeps of a body it encoded
_sleep = anyio.sleep  # module attribute, so tests can record the waits instead of waiting


@dataclass(frozen=True, slots=True, kw_only=True)
class RetryPolicy:
    """How failed requests are retried.

    Attempt `n` (from 0) waits `backoff_base * 2**n` seconds, capped at `backoff_max`,
    minus up to `jitter` of it at random. A `Retry-After` the provider sends replaces
    that wait; one longer than `max_retry_after` is not waited for: the error is raised.
    """

    max_retries: int = 2
    backoff_base: float = 0.5
    backoff_max: float = 8.0
    jitter: float = 0.25
    max_retry_after: float = 60.0

    def delay(self, attempt: int, retry_after: float | None = None) -> float | None:
        """Seconds to wait before retry number `attempt` (from 0); `None`: do not retry."""
        if attempt >= self.max_retries:
            return None
        if retry_after is not None:
            return retry_after if retry_after <= self.max_retry_after else None
        wait = min(self.backoff_max, self.backoff_base * 2.0**attempt)
        return wait * (1 - self.jitter * random.random())


def retry_after(headers: httpx.Headers) -> float | None:
    """The wait a response asks for: `retry-after-ms`, or `Retry-After` in seconds or as a date."""
    value = headers.get("retry-after-ms")
    if value is not None:
        try:
            return max(0.0, float(value) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        seconds = float(value)
    except ValueError:
        pass
    else:
        return seconds if seconds > 0 else 0.0  # also NaN -> 0
    try:
        date = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if date.tzinfo is None:  # "-0000" and the asctime form: RFC 9110 dates are in UTC
        date = date.replace(tzinfo=UTC)
    try:
        wait = (date - datetime.now(UTC)).total_seconds()
    except OverflowError:
        return None
    return max(0.0, wait)


class Secret:
    """A value that never shows in a repr or a string (API keys); `reveal()` returns it."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        """The secret value itself."""
        return self._value

    def __repr__(self) -> str:
        return "Secret('***')"

    __str__ = __repr__


MIN_SECRET_CHARS = 8
"""Shorter secrets (test placeholders such as `"k"`; no real API key) are not searched
for: they cannot be told from ordinary text."""


Secrets: TypeAlias = str | tuple[str, ...] | None
"""What error texts must not show: the API key, or it and the other credentials a model
was given (a password in its base URL, header values)."""


def _each(secret: Secrets) -> tuple[str, ...]:
    values = (secret,) if isinstance(secret, str) else secret or ()
    return tuple(s for s in values if s and len(s) >= MIN_SECRET_CHARS)


def redact(text: str, secret: Secrets) -> str:
    """`text` with every occurrence of `secret` (each of them) masked."""
    for value in _each(secret):
        text = text.replace(value, "***")
    return text


def mentions(exc: BaseException, secret: Secrets) -> bool:
    """Whether `secret` (any of them) shows in the message, repr or arguments of `exc`
    or of any exception it chains (`__cause__`, `__context__`)."""
    values = _each(secret)
    if not values:
        return False
    stack, seen = [exc], set()
    while stack:
        e = stack.pop()
        if id(e) in seen:
            continue
        seen.add(id(e))
        try:
            texts = [str(e), repr(e), *map(repr, e.args)]
        except Exception:
            return True  # cannot be inspected: assume the worst
        if any(value in t for t in texts for value in values):
            return True
        stack.extend(x for x in (e.__cause__, e.__context__) if x is not None)
    return False


def safe_cause(exc: BaseException, secret: Secrets) -> BaseException | None:
    """`exc`, to chain to a provider error; `None` if it would show `secret`."""
    return None if mentions(exc, secret) else exc


def clean_api_key(key: str | None, *, provider: str, source: str = "api_key") -> Secret | None:
    """`key` without surrounding whitespace (a key read from a file ends with a newline);
    `None` if nothing is left.

    Raises `InvalidAPIKeyError`, which does not quote the key, when a control or
    non-ASCII character remains inside: it cannot be sent in a header, and the HTTP
    client's error would quote the whole key.
    """
    if key is None:
        return None
    if not isinstance(key, str):
        raise InvalidAPIKeyError(
            f"{provider}: the API key from {source} must be a string, not {type(key).__name__}",
            provider=provider,
        )
    key = key.strip()
    for position, char in enumerate(key):
        if not " " <= char <= "~":
            kind = "a control" if char < " " or char == "\x7f" else "a non-ASCII"
            raise InvalidAPIKeyError(
                f"{provider}: the API key from {source} holds {kind} character (at position "
                f"{position} of {len(key)}, after stripping); it cannot be sent in a header",
                provider=provider,
            )
    return Secret(key) if key else None


MIN_REDACTED_KEY = MIN_SECRET_CHARS
"""Keys at least this long are masked in error messages (real API keys are far longer)."""

_Error = TypeVar("_Error", bound=BaseException)


def redact_error(error: _Error, secret: Secrets) -> _Error:
    """`error` (changed in place) with `secret` (each of them) masked in its arguments,
    `message` and `body`; a cause or context that quotes one is dropped from it. Keys
    shorter than `MIN_REDACTED_KEY` characters are left alone: masking them would garble
    the message."""
    values = _each(secret)
    if not values:
        return error
    error.args = tuple(redact(a, values) if isinstance(a, str) else a for a in error.args)
    for name in ("message", "body"):
        value = getattr(error, name, None)
        if isinstance(value, str):
            text = redact(value, values)
            for each in values:
                text = _redact_cut(text, each)
            setattr(error, name, text)
    if error.__cause__ is not None and _quotes(error.__cause__, values):
        error.__cause__ = None
        error.__suppress_context__ = True
    if error.__context__ is not None and _quotes(error.__context__, values):
        error.__context__ = None
    return error


def _quotes(exc: BaseException, values: tuple[str, ...]) -> bool:
    text = repr(exc) + str(exc)
    return any(value in text for value in values)


def _redact_cut(text: str, secret: str) -> str:
    """`text` with a prefix of `secret` at its very end masked (a body excerpt that cut
    the key off)."""
    for cut in range(len(secret) - 1, MIN_SECRET_CHARS - 1, -1):
        if text.endswith(secret[:cut]):
            return text[:-cut] + "***"
    return text


PARSE_ERRORS: tuple[type[Exception], ...] = (
    LookupError,
    TypeError,
    ValueError,
    AttributeError,
    ArithmeticError,
    RecursionError,
)
"""What reading an unexpected response shape can raise: all become typed errors."""


def token_count(value: Any) -> int:
    """A token count from the wire: a finite, non-negative number, else 0."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return 0
    if value != value or value in (float("inf"), float("-inf")) or value < 0:
        return 0
    return int(value)


def json_excerpt(payload: Any) -> str:
    """`payload` as JSON for an error's `body` (a repr if it cannot be written as JSON)."""
    try:
        return json.dumps(payload)[:BODY_EXCERPT_CHARS]
    except PARSE_ERRORS:
        return repr(payload)[:BODY_EXCERPT_CHARS]


_scan_once: Callable[[str, int], tuple[Any, int]] = json.JSONDecoder().scan_once  # type: ignore[attr-defined]
# (what `json.loads` runs, without its layers)


def json_loads(text: str) -> Any:
    """`json.loads(text)`, with a shortcut for what streams carry: one compact object.

    The same value, and the same error, as `json.loads` for every input (anything the
    shortcut does not read to its end goes to `json.loads`; tests compare the two)."""
    if text[:1] == "{" and text[-1:] == "}":
        try:
            value, end = _scan_once(text, 0)
        except StopIteration:  # pragma: no cover - cannot happen at a "{"
            return json.loads(text)
        if end == len(text):
            return value
    return json.loads(text)


_BODY_JSON = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)
"""What `json.dumps(..., ensure_ascii=False, separators=(",", ":"), allow_nan=False)` does,
built once."""
_COMPACT_JSON = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))

_SURROGATE = re.compile("[\ud800-\udfff]")


def json_body(body: Mapping[str, Any]) -> bytes:
    """`body` as UTF-8 JSON; lone surrogates (from `os.listdir`, a tool, a model), which
    UTF-8 cannot encode, are sent as U+FFFD instead of failing the request."""
    text = _BODY_JSON.encode(body)
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return _SURROGATE.sub("\ufffd", text).encode("utf-8")


@overload
def api_key_from_env(env_var: str, *, provider: str, required: Literal[True]) -> Secret: ...
@overload
def api_key_from_env(env_var: str, *, provider: str, required: bool) -> Secret | None: ...
def api_key_from_env(env_var: str, *, provider: str, required: bool) -> Secret | None:
    """The API key in `env_var`, cleaned as `clean_api_key` does; raises
    `AuthenticationError` naming the variable if required and unset."""
    key = clean_api_key(
        os.environ.get(env_var), provider=provider, source=f"the {env_var} environment variable"
    )
    if key is not None:
        return key
    if required:
        raise AuthenticationError(
            f"{provider}: no API key: pass api_key=... or set the {env_var} environment variable",
            provider=provider,
        )
    return None


def error_message(payload: Any) -> str | None:
    """The human message of a provider's error body (OpenAI, Anthropic and common servers)."""
    if isinstance(payload, Mapping):
        for key in ("error", "message", "detail"):
            value = payload.get(key)
            if isinstance(value, str) and value:
                return value
            if isinstance(value, Mapping):
                found = error_message(value)
                if found:
                    return found
    return None


ErrorType = Callable[[int, Any], type[ProviderError] | None]
"""A wire format's choice of error class from a failed response's status and JSON body
(already redacted); `None`: the status decides (`WireFormat.error_type`)."""


RATE_LIMIT_CODES = frozenset(
    {
        "rate_limit_exceeded",
        "rate_limit_error",
        "rate_limited",
        "too_many_requests",
        "requests_limit_exceeded",
        "tokens_limit_exceeded",
        "resource_exhausted",
        "429",
    }
)
"""In-band error codes and types (any provider's) that mean "too many requests"."""

UNAVAILABLE_CODES = frozenset(
    {
        "server_error",
        "internal_error",
        "internal_server_error",
        "internal",
        "api_error",
        "overloaded",
        "overloaded_error",
        "server_overloaded",
        "engine_overloaded",
        "service_unavailable",
        "unavailable",
        "bad_gateway",
        "gateway_timeout",
        "timeout",
        "deadline_exceeded",
        "vector_store_timeout",
        "500",
        "502",
        "503",
        "504",
        "529",
    }
)
"""In-band error codes and types that mean the provider is down or overloaded for now."""


def error_type_for_code(*codes: object) -> type[ProviderError] | None:
    """The retryable class an in-band error's `code` or `type` names (the first of
    `codes` that names one): `RateLimitError` (`too_many_requests`,
    `rate_limit_exceeded`, `RESOURCE_EXHAUSTED`, ...) or `ProviderUnavailableError`
    (`server_error`, `overloaded_error`, `UNAVAILABLE`, ...); `None` for any other.
    Every provider reads its stream's `error` events with it, so a rate limit is a
    `RateLimitError` whichever API reports it."""
    for code in codes:
        if isinstance(code, int) and not isinstance(code, bool):
            code = str(code)
        if not isinstance(code, str) or len(code) > 64:
            continue
        key = code.strip().lower().replace("-", "_").replace(" ", "_")
        if key in RATE_LIMIT_CODES:
            return RateLimitError
        if key in UNAVAILABLE_CODES:
            return ProviderUnavailableError
    return None


def error_for_status(
    status: int,
    message: str,
    *,
    provider: str,
    request_id: str | None = None,
    body: str = "",
    wait: float | None = None,
    kind: type[ProviderError] | None = None,
) -> ProviderError:
    """The `ProviderError` subclass for an HTTP status, or `kind` when given (a wire
    format's reading of the body, `WireFormat.error_type`)."""
    fields: dict[str, Any] = {
        "status_code": status,
        "request_id": request_id,
        "body": body,
        "provider": provider,
    }
    if kind is not None:
        if issubclass(kind, RateLimitError):
            return kind(message, retry_after=wait, **fields)
        return kind(message, **fields)
    if status in (401, 403):
        return AuthenticationError(message, **fields)
    if status == 429:
        return RateLimitError(message, retry_after=wait, **fields)
    if status == 408 or status >= 500:
        return ProviderUnavailableError(message, **fields)
    if 400 <= status < 500:
        return BadRequestError(message, **fields)
    return ProviderError(message, **fields)


def error_from_response(
    response: httpx.Response,
    *,
    provider: str,
    secret: Secrets,
    error_detail: Callable[[Any], str | None] = error_message,
    error_type: ErrorType | None = None,
) -> ProviderError:
    """The error for a failed, fully read response, with the provider's own message
    (read from the JSON body by `error_detail`), of the class `error_type` picks from
    the status and the JSON body (`None` there, or no `error_type`: by the status)."""
    body = redact(response.text, secret)
    payload: Any = None
    try:
        payload = json.loads(body)
        detail = error_detail(payload)
    except PARSE_ERRORS:
        detail = None
    kind = _error_type(error_type, response.status_code, payload)
    if detail is not None and not isinstance(detail, str):
        detail = None
    detail = detail or response.reason_phrase or "request failed"
    return error_for_status(
        response.status_code,
        f"{provider}: {redact(detail, secret)}",
        provider=provider,
        request_id=response.headers.get("x-request-id") or response.headers.get("request-id"),
        body=body,
        wait=retry_after(response.headers),
        kind=kind,
    )


def _error_type(
    error_type: ErrorType | None, status: int, payload: Any
) -> type[ProviderError] | None:
    if error_type is None:
        return None
    try:
        kind = error_type(status, payload)
    except PARSE_ERRORS:
        return None  # an odd body: the status decides
    return kind if isinstance(kind, type) and issubclass(kind, ProviderError) else None


def _json_headers(headers: Mapping[str, str]) -> dict[str, str]:
    if any(name.lower() == "content-type" for name in headers):
        return dict(headers)
    return {"content-type": "application/json", **headers}


def _should_retry(response: httpx.Response) -> bool:
    hint = response.headers.get("x-should-retry")
    if hint in ("true", "false"):
        return bool(hint == "true")
    status: int = response.status_code
    return status in _RETRY_STATUSES or status >= 500


class HTTPClient:
    """An `httpx.AsyncClient` (injected, or created at first use) plus the retry policy.

    An injected client is the caller's to close; one created here is closed by `aclose()`.
    `timeout=None` keeps an injected client's own timeout (and uses `DEFAULT_TIMEOUT`
    for a created one).
    """

    def __init__(
        self,
        *,
        provider: str,
        http_client: httpx.AsyncClient | None,
        timeout: float | httpx.Timeout | None,
        retry: RetryPolicy,
        error_detail: Callable[[Any], str | None] = error_message,
        error_type: ErrorType | None = None,
    ) -> None:
        self.provider = provider
        self.retry = retry
        self._error_detail = error_detail
        self._error_type = error_type
        self._client = http_client
        self._owned = http_client is None
        self._timeout = timeout
        self._urls: dict[str, httpx.URL] = {}  # parsed once: httpx.URL is immutable

    @property
    def client(self) -> httpx.AsyncClient:
        """The client requests go through (created now if needed)."""
        if self._client is None:
            self._client = httpx.AsyncClient(
                timeout=self._timeout if self._timeout is not None else DEFAULT_TIMEOUT
            )
        return self._client

    async def aclose(self) -> None:
        """Close the client if this object created it."""
        if self._owned and self._client is not None:
            client, self._client = self._client, None
            await client.aclose()

    async def post_json(
        self, url: str, body: Mapping[str, Any], *, headers: Mapping[str, str], secret: Secrets
    ) -> dict[str, Any]:
        """POST `body` as JSON and return the JSON object answered."""
        sending = self.send(url, body, headers=headers, secret=secret, stream=False)
        del body  # `send` holds it until it is encoded
        response = await sending
        try:
            payload = json.loads(response.content)
        except (ValueError, RecursionError) as exc:
            raise self._invalid(response, "the response is not JSON", secret) from exc
        if not isinstance(payload, dict):
            raise self._invalid(response, "the response is not a JSON object", secret)
        return payload

    def _invalid(self, response: httpx.Response, why: str, secret: Secrets) -> ProviderError:
        return InvalidResponseError(
            f"{self.provider}: {why}",
            status_code=response.status_code,
            request_id=response.headers.get("x-request-id") or response.headers.get("request-id"),
            body=redact(response.text, secret),
            provider=self.provider,
        )

    def _url(self, url: str) -> httpx.URL:
        """`url` parsed, from a small cache (parsing costs as much as building the body)."""
        parsed = self._urls.get(url)
        if parsed is None:
            parsed = httpx.URL(url)
            if len(self._urls) >= MAX_CACHED_URLS:
                self._urls.clear()
            self._urls[url] = parsed
        return parsed

    async def send(
        self,
        url: str,
        body: Mapping[str, Any],
        *,
        headers: Mapping[str, str],
        secret: Secrets,
        stream: bool,
    ) -> httpx.Response:
        """POST `body`, retrying per the policy; return the successful response.

        With `stream=True` the body is not read: the caller must close the response.
        `body` is encoded once, at the first attempt, and every attempt sends those
        bytes; the mapping is not referenced after that, so a caller that drops its own
        reference (`HTTPChatModel` does) does not keep it alive while the answer is
        awaited.
        """
        client = self.client
        timeout = self._timeout if self._timeout is not None else httpx.USE_CLIENT_DEFAULT
        target: httpx.URL | str = url
        content: bytes | None = None
        attempt = 0
        while True:
            wait: float | None = None
            cause: BaseException | None = None
            unsent: ProviderError | None = None
            try:
                if content is None:
                    target = self._url(url)
                    content = json_body(body)
                    body = _SENT
                request = client.build_request(
                    "POST", target, content=content, headers=_json_headers(headers), timeout=timeout
                )
            except httpx.InvalidURL as exc:
                cause = exc
                unsent = ProviderRequestError(
                    f"{self.provider}: invalid URL: {redact(str(exc), secret)}",
                    provider=self.provider,
                )
            except (TypeError, ValueError, RecursionError) as exc:
                cause = exc
                unsent = BadRequestError(
                    f"{self.provider}: the request cannot be sent as JSON: "
                    f"{redact(str(exc), secret)}",
                    provider=self.provider,
                )
            if unsent is not None:  # raised here, not in `except`, to chain only a safe cause
                raise unsent from safe_cause(cause, secret) if cause else None
            try:
                response = await client.send(request, stream=stream)
                if not response.is_success:
                    try:
                        await response.aread()
                    finally:
                        await response.aclose()
            except httpx.TimeoutException as exc:
                cause = exc
                error: ProviderError = ProviderTimeoutError(
                    f"{self.provider}: no response within the timeout ({type(exc).__name__})",
                    provider=self.provider,
                )
                retryable = True
            except (httpx.NetworkError, httpx.RemoteProtocolError, httpx.ProxyError) as exc:
                cause = exc
                error = ProviderUnavailableError(
                    f"{self.provider}: cannot reach {request.url.host}: "
                    f"{redact(str(exc), secret) or type(exc).__name__}",
                    provider=self.provider,
                )
                retryable = True
            except httpx.DecodingError as exc:
                cause = exc
                error = InvalidResponseError(
                    f"{self.provider}: the response body cannot be decoded ({type(exc).__name__})",
                    provider=self.provider,
                )
                retryable = False
            except (httpx.HTTPError, httpx.InvalidURL) as exc:
                # LocalProtocolError (an invalid header value: its message quotes the value),
                # UnsupportedProtocol, TooManyRedirects, ...: never chained as they are.
                cause = None if isinstance(exc, httpx.LocalProtocolError) else exc
                error = ProviderRequestError(
                    f"{self.provider}: the request could not be sent ({type(exc).__name__})",
                    provider=self.provider,
                )
                retryable = False
            else:
                if response.is_success:
                    return response
                error = error_from_response(
                    response,
                    provider=self.provider,
                    secret=secret,
                    error_detail=self._error_detail,
                    error_type=self._error_type,
                )
                # a refused output schema fails the same way again (llama-cpp-python: 500)
                retryable = _should_retry(response) and not isinstance(
                    error, OutputSchemaRefusedError
                )
                wait = retry_after(response.headers)
            delay = self.retry.delay(attempt, wait) if retryable else None
            if delay is None:
                raise error from safe_cause(cause, secret) if cause else None
            attempt += 1
            logger.info(
                "%s: %s; retry %d of %d in %.2fs",
                self.provider,
                type(error).__name__,
                attempt,
                self.retry.max_retries,
                delay,
            )
            await _sleep(delay)


async def sse_events(
    response: httpx.Response, *, provider: str, secret: Secrets = None
) -> AsyncIterator[ServerSentEvent]:
    """The server-sent events of an open response; a broken connection, a timeout or an
    undecodable body becomes `ProviderStreamError` (a `StreamInterruptedError`), chained
    to the client's error unless that would show `secret`."""
    decoder = SSEDecoder()
    chunks = response.aiter_bytes()
    broken: BaseException | None = None
    try:
        async for chunk in chunks:
            for event in decoder.feed(chunk):
                yield event
    except (httpx.HTTPError, httpx.StreamError) as exc:
        broken = exc
    finally:
        await chunks.aclose()  # type: ignore[attr-defined]
    if broken is not None:
        raise ProviderStreamError(
            f"{provider}: the stream broke off ({type(broken).__name__})", provider=provider
        ) from safe_cause(broken, secret)
    for event in decoder.close():
        yield event


async def close_response(response: httpx.Response) -> None:
    """Close a streamed response even while being cancelled, so its connection is released."""
    with anyio.CancelScope(shield=True):
        await response.aclose()


_SCALARS = frozenset({str, int, float, bool, type(None)})


def plain(value: Any) -> Any:
    """`value` with every mapping made a dict and every tuple a list, ready for JSON.

    Exact dicts, lists, tuples and JSON scalars (what schemas are made of) take a
    shortcut past the ABC checks; anything else goes through `plain_general`, and both
    give the same result (tests/test_provider_fast_paths.py compares them)."""
    kind = type(value)
    if kind in _SCALARS:
        return value
    if kind is dict:
        return {k if type(k) is str else str(k): plain(v) for k, v in value.items()}
    if kind is list or kind is tuple:
        return [plain(v) for v in value]
    return plain_general(value)


def plain_general(value: Any) -> Any:
    """`plain` by the ABCs alone: any mapping a dict, any sequence but text a list."""
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, Sequence) and not isinstance(value, (str, bytes)):
        return [plain(v) for v in value]
    return value


def json_dumps(value: Any) -> str:
    """Compact JSON text, non-ASCII kept: how tool-call arguments are written."""
    return _COMPACT_JSON.encode(value)


__all__ = [
    "DEFAULT_TIMEOUT",
    "MAX_CACHED_URLS",
    "MIN_REDACTED_KEY",
    "MIN_SECRET_CHARS",
    "PARSE_ERRORS",
    "RATE_LIMIT_CODES",
    "UNAVAILABLE_CODES",
    "ErrorType",
    "HTTPClient",
    "RetryPolicy",
    "Secret",
    "Secrets",
    "api_key_from_env",
    "clean_api_key",
    "close_response",
    "error_for_status",
    "error_from_response",
    "error_message",
    "error_type_for_code",
    "json_body",
    "json_dumps",
    "json_excerpt",
    "json_loads",
    "mentions",
    "plain",
    "plain_general",
    "redact",
    "redact_error",
    "retry_after",
    "safe_cause",
    "sse_events",
    "token_count",
]

"""`HTTPClient`: an `httpx.AsyncClient` (injected, or created at first use) that POSTs
JSON with the retry policy, turning every failure into a typed `ProviderError` with the
credentials masked.

Request bodies are UTF-8 JSON, encoded once for every attempt (`json_body`).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

import anyio
import httpx

from ..errors import (
    BadRequestError,
    InvalidResponseError,
    OutputSchemaRefusedError,
    ProviderError,
    ProviderRequestError,
    ProviderTimeoutError,
    ProviderUnavailableError,
)
from .error_mapping import ErrorType, error_from_response, error_message
from .json_values import json_body
from .retry import RetryPolicy, retry_after, should_retry
from .secrets import Secrets, redact, safe_cause

__all__ = ["DEFAULT_TIMEOUT", "MAX_CACHED_URLS", "HTTPClient"]

logger = logging.getLogger("advisorchain.providers")

DEFAULT_TIMEOUT = httpx.Timeout(600.0, connect=10.0)
"""Timeout of the client a provider creates itself: long answers can take minutes."""

MAX_CACHED_URLS = 64
"""Parsed request URLs an `HTTPClient` keeps (one per model and path, as a rule)."""

_SENT: Mapping[str, Any] = MappingProxyType({})  # what `send` keeps of a body it encoded
_sleep = anyio.sleep  # module attribute, so tests can record the waits instead of waiting


def _json_headers(headers: Mapping[str, str]) -> dict[str, str]:
    if any(name.lower() == "content-type" for name in headers):
        return dict(headers)
    return {"content-type": "application/json", **headers}


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
        awaited. Each attempt is `_attempt`; a failure it reports retryable waits
        `RetryPolicy.delay` (the response's `Retry-After` when it sent one), any other,
        or the last, is raised.
        """
        client = self.client
        target: httpx.URL | str = url
        content: bytes | None = None
        attempt = 0
        while True:
            if content is None:
                target, content = self._encode(url, body, secret)
                body = _SENT
            request = self._request(client, target, content, headers, secret)
            outcome = await self._attempt(client, request, secret, stream)
            if isinstance(outcome, httpx.Response):
                return outcome
            error, cause, retryable, wait = outcome
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

    def _encode(
        self, url: str, body: Mapping[str, Any], secret: Secrets
    ) -> tuple[httpx.URL, bytes]:
        """The parsed URL and the JSON bytes of `body` (`_unsendable` when they cannot be
        had)."""
        try:
            return self._url(url), json_body(body)
        except (httpx.InvalidURL, TypeError, ValueError, RecursionError) as exc:
            cause: BaseException = exc
        raise self._unsendable(cause, secret) from safe_cause(cause, secret)

    def _request(
        self,
        client: httpx.AsyncClient,
        target: httpx.URL | str,
        content: bytes,
        headers: Mapping[str, str],
        secret: Secrets,
    ) -> httpx.Request:
        """One attempt's request (built again for each: httpx requests are single-use)."""
        timeout = self._timeout if self._timeout is not None else httpx.USE_CLIENT_DEFAULT
        try:
            return client.build_request(
                "POST", target, content=content, headers=_json_headers(headers), timeout=timeout
            )
        except (httpx.InvalidURL, TypeError, ValueError, RecursionError) as exc:
            cause: BaseException = exc
        raise self._unsendable(cause, secret) from safe_cause(cause, secret)

    def _unsendable(self, cause: BaseException, secret: Secrets) -> ProviderError:
        """The error for a request that cannot be built: `ProviderRequestError` for an
        invalid URL, else `BadRequestError` (not JSON). Raised by the callers outside
        their `except`, so that only a cause that shows no secret is chained."""
        if isinstance(cause, httpx.InvalidURL):
            return ProviderRequestError(
                f"{self.provider}: invalid URL: {redact(str(cause), secret)}",
                provider=self.provider,
            )
        return BadRequestError(
            f"{self.provider}: the request cannot be sent as JSON: {redact(str(cause), secret)}",
            provider=self.provider,
        )

    async def _attempt(
        self, client: httpx.AsyncClient, request: httpx.Request, secret: Secrets, stream: bool
    ) -> httpx.Response | tuple[ProviderError, BaseException | None, bool, float | None]:
        """Send `request` once: the successful response, or the typed error with the
        cause it may chain, whether it is worth retrying and the wait the server asked for.

        Timeouts and connection failures are retryable; a failed status is when the
        server's `x-should-retry` or the status says so (a refused output schema never:
        it fails the same way again)."""
        try:
            response = await client.send(request, stream=stream)
            if not response.is_success:
                try:
                    await response.aread()
                finally:
                    await response.aclose()
        except httpx.TimeoutException as exc:
            timeout = ProviderTimeoutError(
                f"{self.provider}: no response within the timeout ({type(exc).__name__})",
                provider=self.provider,
            )
            return timeout, exc, True, None
        except (httpx.NetworkError, httpx.RemoteProtocolError, httpx.ProxyError) as exc:
            unreachable = ProviderUnavailableError(
                f"{self.provider}: cannot reach {request.url.host}: "
                f"{redact(str(exc), secret) or type(exc).__name__}",
                provider=self.provider,
            )
            return unreachable, exc, True, None
        except httpx.DecodingError as exc:
            undecodable = InvalidResponseError(
                f"{self.provider}: the response body cannot be decoded ({type(exc).__name__})",
                provider=self.provider,
            )
            return undecodable, exc, False, None
        except (httpx.HTTPError, httpx.InvalidURL) as exc:
            # LocalProtocolError (an invalid header value: its message quotes the value),
            # UnsupportedProtocol, TooManyRedirects, ...: never chained as they are.
            unsent = ProviderRequestError(
                f"{self.provider}: the request could not be sent ({type(exc).__name__})",
                provider=self.provider,
            )
            cause = None if isinstance(exc, httpx.LocalProtocolError) else exc
            return unsent, cause, False, None
        if response.is_success:
            return response
        error = error_from_response(
            response,
            provider=self.provider,
            secret=secret,
            error_detail=self._error_detail,
            error_type=self._error_type,
        )
        retryable = should_retry(response) and not isinstance(error, OutputSchemaRefusedError)
        return error, None, retryable, retry_after(response.headers)

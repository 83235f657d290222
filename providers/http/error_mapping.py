"""Failed responses and in-band errors to typed `ProviderError`s: by HTTP status, by the
in-band codes every provider uses (`error_type_for_code`), or by a wire format's own
reading of the body (`WireFormat.error_type`)."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

import httpx

from ..errors import (
    AuthenticationError,
    BadRequestError,
    ProviderError,
    ProviderUnavailableError,
    RateLimitError,
)
from .json_values import PARSE_ERRORS
from .retry import retry_after
from .secrets import Secrets, redact

__all__ = [
    "RATE_LIMIT_CODES",
    "UNAVAILABLE_CODES",
    "ErrorType",
    "error_for_status",
    "error_from_response",
    "error_message",
    "error_type_for_code",
]


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

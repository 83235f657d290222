"""Errors of the HTTP providers: one type per kind of failure, all `ProviderError`s.

`except ProviderError` catches every failure of a provider. A stream that breaks after it
started raises `ProviderStreamError`, which is also a `StreamInterruptedError` (from
`core.errors`), because the caller has already received part of the answer. No error's
message, body or chained cause holds the API key.
"""

from __future__ import annotations

from ..core.errors import AdvisorChainError, OutputSchemaRefused, StreamInterruptedError

BODY_EXCERPT_CHARS = 500
"""How much of an error response's body an exception keeps."""


class ProviderError(AdvisorChainError):
    """A provider refused or failed a request.

    `status_code` is the HTTP status (`None` when no response arrived), `request_id` the
    provider's request id header when it sent one, `body` a short excerpt of the response
    body (API keys are redacted from it), `provider` the provider's name.
    """

    def __init__(
        self,
        message: str,
        *,
        status_code: int | None = None,
        request_id: str | None = None,
        body: str = "",
        provider: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status_code = status_code
        self.request_id = request_id
        self.body = body[:BODY_EXCERPT_CHARS]
        self.provider = provider

    def __str__(self) -> str:
        details = [f"status {self.status_code}"] if self.status_code is not None else []
        if self.request_id:
            details.append(f"request id {self.request_id}")
        return f"{self.message} ({', '.join(details)})" if details else self.message

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}({self.message!r}, status_code={self.status_code!r}, "
            f"request_id={self.request_id!r})"
        )


class AuthenticationError(ProviderError):
    """The API key is missing, wrong, or lacks permission (HTTP 401 / 403)."""


class InvalidAPIKeyError(AuthenticationError, ValueError):
    """The API key (given, or read from the environment) cannot be sent in a header: it
    holds a control or non-ASCII character inside. The message never quotes the key."""


class RateLimitError(ProviderError):
    """Too many requests (HTTP 429), still refused after the retries.

    `retry_after` is the wait in seconds the provider asked for, when it said.
    """

    def __init__(
        self,
        message: str,
        *,
        status_code: int | None = None,
        request_id: str | None = None,
        body: str = "",
        provider: str | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(
            message, status_code=status_code, request_id=request_id, body=body, provider=provider
        )
        self.retry_after = retry_after


class BadRequestError(ProviderError, ValueError):
    """The provider rejected the request itself (HTTP 400 and other 4xx); `message` says why."""


class OutputSchemaRefusedError(BadRequestError, OutputSchemaRefused):
    """The server refused the request's output schema (`ChatOptions.output_schema`, sent
    as `response_format`): llama-cpp-python's `llama_cpp.server` answers a `json_schema`
    format with HTTP 500. Not retried; `StructuredOutputAdvisor(mode="auto")` asks for
    the schema in the prompt instead."""


class ProviderUnavailableError(ProviderError):
    """The provider could not answer: HTTP 5xx, overloaded, or unreachable, after the retries."""


class ProviderTimeoutError(ProviderUnavailableError, TimeoutError):
    """No response within the configured timeout, after the retries."""


class InvalidResponseError(ProviderError):
    """A complete (non-streamed) response could not be understood: not JSON, or the wrong shape."""


class ProviderRequestError(ProviderError):
    """The HTTP client could not complete the request as built (an invalid header value
    or URL, an unsupported protocol, too many redirects); not retried."""


class ProviderStreamError(ProviderError, StreamInterruptedError):
    """A provider's stream broke off, or sent something that cannot be read, after it
    started: nothing is retried, since part of the answer was delivered."""


__all__ = [
    "BODY_EXCERPT_CHARS",
    "AuthenticationError",
    "BadRequestError",
    "InvalidAPIKeyError",
    "InvalidResponseError",
    "OutputSchemaRefusedError",
    "ProviderError",
    "ProviderRequestError",
    "ProviderStreamError",
    "ProviderTimeoutError",
    "ProviderUnavailableError",
    "RateLimitError",
]

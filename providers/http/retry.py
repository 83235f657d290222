"""How failed requests are retried: `RetryPolicy`, the wait a response asks for, and
which responses are worth another attempt.

Retries cover only getting a successful response: a 408, 409, 429 or 5xx status, a
connection error or a timeout is retried with exponential backoff and jitter, waiting
exactly as long as `Retry-After` / `retry-after-ms` ask when the provider says. Once a
stream's response is open nothing is retried, so no output is ever repeated.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

import httpx

__all__ = ["RetryPolicy", "retry_after", "should_retry"]

_RETRY_STATUSES = frozenset({408, 409, 429})


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


def should_retry(response: httpx.Response) -> bool:
    """Whether a failed response is worth another attempt: the server's `x-should-retry`
    when it says, else a 408, 409, 429 or 5xx status."""
    hint = response.headers.get("x-should-retry")
    if hint in ("true", "false"):
        return bool(hint == "true")
    status: int = response.status_code
    return status in _RETRY_STATUSES or status >= 500

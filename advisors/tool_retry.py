"""`ToolRetryAdvisor`: runs failed calls of idempotent and read-only tools again."""

from __future__ import annotations

import logging
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import TypeAlias

import anyio
from opentelemetry import trace

from ..core.advisor import Advisor, ToolNext
from ..core.checks import require_callable, require_number
from ..core.errors import ToolExecutionError
from ..core.invocation import ToolInvocation, ToolResult

logger = logging.getLogger("advisorchain.retry")

Backoff: TypeAlias = Callable[[int], float]
"""Seconds to wait after failed attempt number `n` (1-based) before the next one."""

Sleep: TypeAlias = Callable[[float], Awaitable[object]]

ATTEMPTS_ATTRIBUTE = "advisorchain.tool.attempts"


@dataclass(frozen=True, slots=True)
class ExponentialBackoff:
    """`initial * factor**(n-1)` seconds after the n-th failure, at most `maximum`, of
    which a random fraction up to `jitter` is taken off (so retries spread out)."""

    initial: float = 0.2
    factor: float = 2.0
    maximum: float = 10.0
    jitter: float = 0.5

    def __post_init__(self) -> None:
        for name in ("initial", "factor", "maximum", "jitter"):
            require_number(getattr(self, name), f"ExponentialBackoff.{name}")
        if self.initial < 0 or self.factor < 1 or self.maximum < 0:
            raise ValueError("backoff needs initial >= 0, factor >= 1, maximum >= 0")
        if not 0 <= self.jitter <= 1:
            raise ValueError("jitter must be between 0 and 1")

    def __call__(self, attempt: int) -> float:
        delay = min(self.maximum, self.initial * self.factor ** max(0, attempt - 1))
        return delay * (1 - self.jitter * random.random())


class ToolRetryAdvisor(Advisor):
    """Retries failing calls of idempotent or read-only tools; the model sees one result.

    Control flow (`call_tool` only): a call of a tool that is neither `idempotent` nor
    `read_only` passes through untouched. Otherwise the rest of the tool path (`next`)
    runs; if the attempt failed, `next` runs again after `backoff(n)` seconds, up to
    `max_attempts` attempts in all (bounded), and the last attempt's result is returned.

    An attempt failed when its result's outcome is `error` or `timeout` and the
    exception it carries (`ToolResult.error`) is an instance of `retry_on`; or, with the
    loop's `on_tool_error="raise"`, when `next` raised `ToolExecutionError` caused by
    such an exception (after the last attempt that error is raised). Rejected, invalid,
    pending and limited calls are never retried, nor any other exception.

    Each failed attempt is logged (logger `advisorchain.retry`, WARNING, `event=
    "tool_retry"`: tool, call id, attempt, error type, delay; never the message) and
    added as an `advisorchain.tool.retry` event to the current span; a call that needed
    several attempts logs its end (INFO on success, WARNING when it gave up), gets
    `advisorchain.tool.attempts` on the current span and `{"attempts": n}` in its
    result's `metadata`. Place it after a `TracingAdvisor` for one `execute_tool` span
    per call carrying those events, before it for one span per attempt; after an
    `ApprovalAdvisor`, so a retry is not a new approval.

    `sleep` is injectable (tests pass a recorder); `backoff` may be any callable.
    """

    def __init__(
        self,
        max_attempts: int = 3,
        backoff: Backoff | None = None,
        retry_on: type[BaseException] | tuple[type[BaseException], ...] = (Exception,),
        *,
        sleep: Sleep = anyio.sleep,
    ) -> None:
        require_number(max_attempts, "max_attempts", minimum=1, integer=True)
        if backoff is not None and not callable(backoff):
            raise TypeError(
                f"backoff must be a callable attempt -> seconds, not {backoff!r:.60}: for a "
                f"fixed delay write ExponentialBackoff(initial={backoff!r:.20}, factor=1, "
                f"jitter=0) or backoff=lambda attempt: {backoff!r:.20}"
            )
        retry_classes = retry_on if isinstance(retry_on, tuple) else (retry_on,)
        if not retry_classes or not all(
            isinstance(c, type) and issubclass(c, BaseException) for c in retry_classes
        ):
            raise TypeError(
                f"retry_on must be an exception class or a tuple of them, not {retry_on!r:.80}"
            )
        require_callable(sleep, "sleep", "an async sleep(seconds), such as anyio.sleep")
        self.max_attempts = max_attempts
        self.backoff: Backoff = backoff if backoff is not None else ExponentialBackoff()
        self.retry_on: tuple[type[BaseException], ...] = (
            retry_on if isinstance(retry_on, tuple) else (retry_on,)
        )
        self.sleep = sleep

    def __repr__(self) -> str:
        return f"ToolRetryAdvisor(max_attempts={self.max_attempts}, backoff={self.backoff!r})"

    async def call_tool(self, invocation: ToolInvocation, next: ToolNext) -> ToolResult:
        tool = invocation.tool
        if not (tool.idempotent or tool.read_only) or self.max_attempts == 1:
            return await next(invocation)
        attempt = 1
        while True:
            try:
                result = await next(invocation)
            except ToolExecutionError as exc:
                cause = exc.__cause__
                if not isinstance(cause, self.retry_on):
                    raise
                if attempt >= self.max_attempts:
                    self._gave_up(invocation, attempt, cause)
                    raise
                error: BaseException = cause
            else:
                failed = result.error if result.outcome in ("error", "timeout") else None
                if failed is None or not isinstance(failed, self.retry_on):
                    return self._done(invocation, attempt, result)
                if attempt >= self.max_attempts:
                    self._gave_up(invocation, attempt, failed)
                    return self._done(invocation, attempt, result)
                error = failed
            delay = max(0.0, float(self.backoff(attempt)))
            self._retrying(invocation, attempt, error, delay)
            await self.sleep(delay)
            attempt += 1

    def _retrying(
        self, invocation: ToolInvocation, attempt: int, error: BaseException, delay: float
    ) -> None:
        kind = type(error).__qualname__
        logger.warning(
            "tool %r (call %s) attempt %d of %d failed (%s); retrying in %.3f s",
            invocation.name,
            invocation.call.id,
            attempt,
            self.max_attempts,
            kind,
            delay,
            extra={
                "event": "tool_retry",
                "tool": invocation.name,
                "call_id": invocation.call.id,
                "attempt": attempt,
                "error_type": kind,
                "delay": delay,
            },
        )
        span = trace.get_current_span()
        if span.is_recording():
            span.add_event(
                "advisorchain.tool.retry",
                {"attempt": attempt, "error.type": kind, "advisorchain.retry.delay": delay},
            )

    def _gave_up(self, invocation: ToolInvocation, attempt: int, error: BaseException) -> None:
        kind = type(error).__qualname__
        logger.warning(
            "tool %r (call %s) failed %d times (%s); giving up",
            invocation.name,
            invocation.call.id,
            attempt,
            kind,
            extra={
                "event": "tool_retry_exhausted",
                "tool": invocation.name,
                "call_id": invocation.call.id,
                "attempt": attempt,
                "error_type": kind,
            },
        )
        _mark_attempts(attempt)

    def _done(self, invocation: ToolInvocation, attempt: int, result: ToolResult) -> ToolResult:
        if attempt == 1:
            return result
        if result.outcome == "ok":
            logger.info(
                "tool %r (call %s) succeeded on attempt %d",
                invocation.name,
                invocation.call.id,
                attempt,
                extra={
                    "event": "tool_retry_succeeded",
                    "tool": invocation.name,
                    "call_id": invocation.call.id,
                    "attempt": attempt,
                },
            )
            _mark_attempts(attempt)
        return replace(result, metadata={**result.metadata, "attempts": attempt})


def _mark_attempts(attempts: int) -> None:
    span = trace.get_current_span()
    if span.is_recording():
        span.set_attribute(ATTEMPTS_ATTRIBUTE, attempts)


__all__ = ["ATTEMPTS_ATTRIBUTE", "Backoff", "ExponentialBackoff", "Sleep", "ToolRetryAdvisor"]

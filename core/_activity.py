"""What a tool's progress report reaches, with no dependency on the event types:
the round's sink and the call's activity clock, in context variables.

`ToolContext.report_progress` checks the values and calls `report` here; the streaming
tool loop puts a sink in `sink` (`core.progress`, which turns raw reports into
`ToolProgress` events); a tool with an `idle_timeout` runs under `run_while_active`,
whose clock every report restarts. Reports from a worker thread are handed to the event
loop the sink or clock was made in.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from typing import Protocol, TypeVar

import anyio
import anyio.from_thread
import anyio.lowlevel

from .errors import ToolIdleTimeoutError

T = TypeVar("T")


class Loop:
    """The event loop a sink or clock was made in, to come back to from a worker thread."""

    __slots__ = ("thread", "token")

    def __init__(self) -> None:
        self.thread = threading.get_ident()
        self.token = anyio.lowlevel.current_token()

    def run(self, deliver: Callable[[], None]) -> None:
        """Run `deliver` on the loop: now if this is its thread, else handed over (the
        worker waits for it: a flooding thread cannot queue reports without bound)."""
        if threading.get_ident() == self.thread:
            deliver()
            return
        try:
            anyio.from_thread.run_sync(deliver, token=self.token)
        except Exception:  # the loop is gone or closing: the call has ended, drop it
            pass


class RawSink(Protocol):
    """The sink of a streaming round, as reports reach it (`core.progress._Sender`)."""

    @property
    def loop(self) -> Loop:
        """The loop the sink lives in."""
        ...

    def report(
        self, call_id: str, progress: float | None, total: float | None, message: str | None
    ) -> None:
        """Take one report now (the loop's thread); never blocks, never raises."""


class Clock:
    """A tool call's activity clock: `touch()` restarts its idle deadline (loop thread)."""

    __slots__ = ("idle", "loop", "scope")

    def __init__(self, scope: anyio.CancelScope, idle: float) -> None:
        self.scope = scope
        self.idle = idle
        self.loop = Loop()

    def touch(self) -> None:
        self.scope.deadline = anyio.current_time() + self.idle


sink: ContextVar[RawSink | None] = ContextVar("advisorchain_progress_sink", default=None)
activity: ContextVar[Clock | None] = ContextVar("advisorchain_tool_activity", default=None)


async def run_while_active(work: Callable[[], Awaitable[T]], idle: float, name: str) -> T:
    """`await work()`, abandoned with `ToolIdleTimeoutError` after `idle` seconds without a
    progress report from it (each report restarts the clock)."""
    with anyio.CancelScope(deadline=anyio.current_time() + idle) as scope:
        token = activity.set(Clock(scope, idle))
        try:
            return await work()
        finally:
            activity.reset(token)
    raise ToolIdleTimeoutError(f"{name!r} reported no progress for {idle:g} s and was abandoned")


def report(
    call_id: str,
    progress: float | None = None,
    total: float | None = None,
    message: str | None = None,
) -> None:
    """Report the progress of the call `call_id` from its tool (`ToolContext.report_progress`):
    checked, then to this context's clock and sink, if any."""
    check(progress, total, message)
    deliver(sink.get(), activity.get(), call_id, progress, total, message)


def deliver(
    to: RawSink | None,
    clock: Clock | None,
    call_id: str,
    progress: float | None,
    total: float | None,
    message: str | None,
) -> None:
    """Touch `clock` and hand the report to `to`, on their loop."""
    if clock is not None:
        loop = clock.loop
    elif to is not None:
        loop = to.loop
    else:
        return

    def now() -> None:
        if clock is not None:
            clock.touch()
        if to is not None:
            to.report(call_id, progress, total, message)

    loop.run(now)


def check(progress: object, total: object, message: object) -> None:
    """Raise `TypeError`/`ValueError` unless `progress` and `total` are finite numbers or
    `None` and `message` is a string or `None`."""
    for name, value in (("progress", progress), ("total", total)):
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise TypeError(f"{name} must be a number or None, not {type(value).__name__}")
        if not math.isfinite(value):
            raise ValueError(f"{name} must be finite, not {value!r}")
    if message is not None and not isinstance(message, str):
        raise TypeError(f"message must be a str or None, not {type(message).__name__}")


__all__ = [
    "Clock",
    "Loop",
    "RawSink",
    "activity",
    "check",
    "deliver",
    "report",
    "run_while_active",
    "sink",
]

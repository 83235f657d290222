"""How a running tool's progress reaches the stream: a sink in a context variable.

The streaming tool loop opens a sink for a round whose tools report progress (a tool says
so with `reports_progress=True`, or `metadata={"reports_progress": True}`) and yields what
arrives while the round runs; the sink takes only the events of that round's calls.
A tool author calls `ToolContext.report_progress(...)` (`report`), from the tool's task,
a task it started, or the worker thread of a sync tool (the event is handed to the event
loop); internal tools read the sink with `current_progress_sink()` in their own task, or
bind a reporter with `bound_reporter(call_id)` to call from another task. A tool with an
`idle_timeout` also has an activity clock here, which every report restarts, on `call`
and `stream` alike. Outside a stream there is no sink and nothing is sent.
"""

from __future__ import annotations

import math
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Iterable
from contextvars import ContextVar
from typing import Protocol, TypeVar

import anyio
import anyio.from_thread
import anyio.lowlevel
from anyio.streams.memory import MemoryObjectSendStream

from .errors import ToolIdleTimeoutError
from .events import ToolProgress


class ProgressSink(Protocol):
    """Where a running tool sends its progress events."""

    def __call__(self, event: ToolProgress) -> None:
        """Send `event` now; never blocks and never raises (a full buffer drops it)."""

    async def send(self, event: ToolProgress) -> None:
        """Send `event`, waiting for room in the buffer (nothing is dropped)."""


T = TypeVar("T")

# Progress is lossy: a consumer slower than the server drops events, it never stalls a call.
_BUFFER = 256
_MAX_MESSAGE_CHARS = 1000
_sink: ContextVar[ProgressSink | None] = ContextVar("advisorchain_progress_sink", default=None)
_activity: ContextVar[_Clock | None] = ContextVar("advisorchain_tool_activity", default=None)


class _Loop:
    """The event loop a sink or clock was made in, to come back to from a worker thread."""

    __slots__ = ("thread", "token")

    def __init__(self) -> None:
        self.thread = threading.get_ident()
        self.token = anyio.lowlevel.current_token()

    def run(self, deliver: Callable[[], None]) -> None:
        """Run `deliver` on the loop: now if this is its thread, else handed over (the
        worker waits for it: a flooding thread cannot queue events without bound)."""
        if threading.get_ident() == self.thread:
            deliver()
            return
        try:
            anyio.from_thread.run_sync(deliver, token=self.token)
        except Exception:  # the loop is gone or closing: the call has ended, drop it
            pass


class _Clock:
    """A tool call's activity clock: `touch()` restarts its idle deadline (loop thread)."""

    __slots__ = ("idle", "loop", "scope")

    def __init__(self, scope: anyio.CancelScope, idle: float) -> None:
        self.scope = scope
        self.idle = idle
        self.loop = _Loop()

    def touch(self) -> None:
        self.scope.deadline = anyio.current_time() + self.idle


async def run_while_active(work: Callable[[], Awaitable[T]], idle: float, name: str) -> T:
    """`await work()`, abandoned with `ToolIdleTimeoutError` after `idle` seconds without a
    progress report from it (each report restarts the clock)."""
    with anyio.CancelScope(deadline=anyio.current_time() + idle) as scope:
        token = _activity.set(_Clock(scope, idle))
        try:
            return await work()
        finally:
            _activity.reset(token)
    raise ToolIdleTimeoutError(f"{name!r} reported no progress for {idle:g} s and was abandoned")


def report(
    call_id: str,
    progress: float | None = None,
    total: float | None = None,
    message: str | None = None,
) -> None:
    """Report the progress of the call `call_id` from its tool (`ToolContext.report_progress`)."""
    _check(progress, total, message)
    sink, clock = _sink.get(), _activity.get()
    if sink is None and clock is None:
        return
    _deliver(sink, clock, _event(call_id, progress, total, message))


def bound_reporter(call_id: str) -> Callable[[float | None, float | None, str | None], None]:
    """A reporter for the call `call_id` bound to this task's sink and clock, to call
    later from any task of the loop (an SDK's callback task) or a worker thread."""
    sink, clock = _sink.get(), _activity.get()

    def bound(progress: float | None, total: float | None, message: str | None) -> None:
        if sink is not None or clock is not None:
            _deliver(sink, clock, _event(call_id, progress, total, message))

    return bound


def _event(
    call_id: str, progress: float | None, total: float | None, message: str | None
) -> ToolProgress:
    text = None if message is None else str(message)[:_MAX_MESSAGE_CHARS]
    return ToolProgress(
        call_id,
        progress=None if progress is None else float(progress),
        total=None if total is None else float(total),
        message=text,
    )


def _deliver(sink: ProgressSink | None, clock: _Clock | None, event: ToolProgress) -> None:
    def deliver() -> None:
        if clock is not None:
            clock.touch()
        if sink is not None:
            sink(event)

    loop = clock.loop if clock is not None else getattr(sink, "loop", None)
    if loop is None:
        deliver()
    else:
        loop.run(deliver)


def _check(progress: object, total: object, message: object) -> None:
    for name, value in (("progress", progress), ("total", total)):
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise TypeError(f"{name} must be a number or None, not {type(value).__name__}")
        if not math.isfinite(value):
            raise ValueError(f"{name} must be finite, not {value!r}")
    if message is not None and not isinstance(message, str):
        raise TypeError(f"message must be a str or None, not {type(message).__name__}")


def current_progress_sink() -> ProgressSink | None:
    """The sink of the stream this tool call runs in, or `None` (not streaming)."""
    return _sink.get()


def reports_progress(tools: Iterable[object]) -> bool:
    """Whether any of `tools` (`Tool`s or `None`) declares that it reports progress."""
    for tool in tools:
        if getattr(tool, "reports_progress", False) is True:
            return True
        metadata = getattr(tool, "metadata", None)
        if metadata and metadata.get("reports_progress") is True:
            return True
    return False


async def with_progress(
    work: Callable[[], Awaitable[T]],
    into: list[T],
    call_ids: Collection[str] | None = None,
) -> AsyncIterator[ToolProgress]:
    """Run `work()` with a progress sink open, yielding progress events as they come.

    The sink takes only the events of `call_ids` (all, when `None`): a nested turn's
    calls that found this sink in their context never reach this stream as this turn's.
    When the iteration ends, `into` holds `work()`'s result; what `work()` raised is raised
    here. Closing the iterator early cancels `work()`.
    """
    send, receive = anyio.create_memory_object_stream[ToolProgress](_BUFFER)
    failure: list[BaseException] = []
    accepted = None if call_ids is None else frozenset(call_ids)

    async def run(sender: MemoryObjectSendStream[ToolProgress]) -> None:
        token = _sink.set(_Sender(sender, accepted))
        try:
            into.append(await work())
        except anyio.get_cancelled_exc_class():
            raise
        except BaseException as exc:  # handed to the iterating task: never into the group
            failure.append(exc)
        finally:
            _sink.reset(token)
            sender.close()

    closed = False
    async with anyio.create_task_group() as group, receive:
        group.start_soon(run, send)
        async for event in receive:
            try:
                yield event
            except GeneratorExit:
                # Closed early: the task group must see a cancellation, not GeneratorExit.
                closed = True
                group.cancel_scope.cancel()
                break
    if failure and not closed:
        raise failure[0]


class _Sender:
    """The sink of one round: `sink(event)` drops an event when the buffer is full,
    `await sink.send(event)` waits for room (for events that must not be lost)."""

    __slots__ = ("_accepted", "_stream", "loop")

    def __init__(
        self,
        stream: MemoryObjectSendStream[ToolProgress],
        accepted: frozenset[str] | None = None,
    ) -> None:
        self._stream = stream
        self._accepted = accepted
        self.loop = _Loop()

    def __call__(self, event: ToolProgress) -> None:
        if self._accepted is not None and event.call_id not in self._accepted:
            return
        try:
            self._stream.send_nowait(event)
        except (anyio.WouldBlock, anyio.ClosedResourceError, anyio.BrokenResourceError):
            pass

    async def send(self, event: ToolProgress) -> None:
        if self._accepted is not None and event.call_id not in self._accepted:
            return
        try:
            await self._stream.send(event)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            pass

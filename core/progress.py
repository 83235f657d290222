"""How a running tool's progress reaches the stream: a sink in a context variable.

The streaming tool loop opens a sink for a round whose tools report progress (a tool says
so with `reports_progress=True`, or `metadata={"reports_progress": True}`) and yields what
arrives while the round runs; the sink takes only the events of that round's calls.
A tool author calls `ToolContext.report_progress(...)` (`core._activity.report`), from
the tool's task, a task it started, or the worker thread of a sync tool (the report is
handed to the event loop); internal tools read the sink with `current_progress_sink()`
in their own task, or bind a reporter with `bound_reporter(call_id)` to call from
another task. Reports also restart the activity clock of a tool with an `idle_timeout`
(`core._activity`), on `call` and `stream` alike. Outside a stream there is no sink and
nothing is sent.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Iterable
from contextvars import ContextVar
from typing import Any, Protocol, TypeVar, cast

import anyio
from anyio.streams.memory import MemoryObjectSendStream

from . import _activity
from .events import ToolCallFinished, ToolProgress

CallFinished = Callable[[int, Any, float], None]
"""Told `(index in the round, ToolResult, seconds)` as each call of a round finishes."""

call_finished: ContextVar[CallFinished | None] = ContextVar(
    "advisorchain.call_finished", default=None
)
"""Set by `with_progress(on_finished=...)` while a streamed round runs; the manager
tells it each call's end (`ToolCallingManager._run_all`)."""


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


def bound_reporter(call_id: str) -> Callable[[float | None, float | None, str | None], None]:
    """A reporter for the call `call_id` bound to this task's sink and clock, to call
    later from any task of the loop (an SDK's callback task) or a worker thread."""
    sink, clock = _activity.sink.get(), _activity.activity.get()

    def bound(progress: float | None, total: float | None, message: str | None) -> None:
        _activity.deliver(sink, clock, call_id, progress, total, message)

    return bound


def current_progress_sink() -> ProgressSink | None:
    """The sink of the stream this tool call runs in, or `None` (not streaming)."""
    return cast("ProgressSink | None", _activity.sink.get())


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
    *,
    progress: bool = True,
    on_finished: Callable[[int, Any, float], ToolCallFinished | None] | None = None,
) -> AsyncIterator[ToolProgress | ToolCallFinished]:
    """Run `work()` with a progress sink open, yielding progress events as they come.

    The sink takes only the events of `call_ids` (all, when `None`): a nested turn's
    calls that found this sink in their context never reach this stream as this turn's.
    With `progress=False` no sink is opened. With `on_finished`, each call's end (as the
    manager reports it) is yielded as the `ToolCallFinished` it returns, when it
    returns one, as soon as the call ends. When the iteration ends, `into` holds
    `work()`'s result; what `work()` raised is raised here. Closing the iterator early
    cancels `work()`.
    """
    send, receive = anyio.create_memory_object_stream[ToolProgress | ToolCallFinished](_BUFFER)
    failure: list[BaseException] = []
    accepted = None if call_ids is None else frozenset(call_ids)

    def finished(index: int, result: Any, seconds: float) -> None:
        assert on_finished is not None
        event = on_finished(index, result, seconds)
        if event is not None:
            try:
                send.send_nowait(event)
            except (anyio.WouldBlock, anyio.ClosedResourceError, anyio.BrokenResourceError):
                pass  # not yielded now: the caller reports it with the round's end

    async def run(sender: MemoryObjectSendStream[ToolProgress | ToolCallFinished]) -> None:
        token = _activity.sink.set(_Sender(sender, accepted)) if progress else None
        told = call_finished.set(finished) if on_finished is not None else None
        try:
            into.append(await work())
        except anyio.get_cancelled_exc_class():
            raise
        except BaseException as exc:  # handed to the iterating task: never into the group
            failure.append(exc)
        finally:
            if told is not None:
                call_finished.reset(told)
            if token is not None:
                _activity.sink.reset(token)
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
        stream: MemoryObjectSendStream[ToolProgress | ToolCallFinished],
        accepted: frozenset[str] | None = None,
    ) -> None:
        self._stream = stream
        self._accepted = accepted
        self.loop = _activity.Loop()

    def report(
        self, call_id: str, progress: float | None, total: float | None, message: str | None
    ) -> None:
        text = None if message is None else str(message)[:_MAX_MESSAGE_CHARS]
        self(
            ToolProgress(
                call_id,
                progress=None if progress is None else float(progress),
                total=None if total is None else float(total),
                message=text,
            )
        )

    def _wants(self, event: ToolProgress) -> bool:
        return self._accepted is None or event.call_id in self._accepted

    def __call__(self, event: ToolProgress) -> None:
        if not self._wants(event):
            return
        try:
            self._stream.send_nowait(event)
        except (anyio.WouldBlock, anyio.ClosedResourceError, anyio.BrokenResourceError):
            pass

    async def send(self, event: ToolProgress) -> None:
        if not self._wants(event):
            return
        try:
            await self._stream.send(event)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            pass


__all__ = [
    "CallFinished",
    "ProgressSink",
    "bound_reporter",
    "call_finished",
    "current_progress_sink",
    "reports_progress",
    "with_progress",
]

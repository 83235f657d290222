"""How a running tool's progress reaches the stream: a sink in a context variable.

The streaming tool loop opens a sink for a round whose tools report progress (a tool says
so with `metadata={"reports_progress": True}`) and yields what arrives while the round
runs; a tool reads the sink with `current_progress_sink()` in its own task and calls it
from any task of the event loop. Outside a stream there is no sink and nothing is sent.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from contextvars import ContextVar
from typing import Protocol, TypeVar

import anyio
from anyio.streams.memory import MemoryObjectSendStream

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
_sink: ContextVar[ProgressSink | None] = ContextVar("advisorchain_progress_sink", default=None)


def current_progress_sink() -> ProgressSink | None:
    """The sink of the stream this tool call runs in, or `None` (not streaming)."""
    return _sink.get()


def reports_progress(tools: Iterable[object]) -> bool:
    """Whether any of `tools` (`Tool`s or `None`) declares that it reports progress."""
    for tool in tools:
        metadata = getattr(tool, "metadata", None)
        if metadata and metadata.get("reports_progress") is True:
            return True
    return False


async def with_progress(
    work: Callable[[], Awaitable[T]], into: list[T]
) -> AsyncIterator[ToolProgress]:
    """Run `work()` with a progress sink open, yielding progress events as they come.

    When the iteration ends, `into` holds `work()`'s result; what `work()` raised is raised
    here. Closing the iterator early cancels `work()`.
    """
    send, receive = anyio.create_memory_object_stream[ToolProgress](_BUFFER)
    failure: list[BaseException] = []

    async def run(sender: MemoryObjectSendStream[ToolProgress]) -> None:
        token = _sink.set(_sender(sender))
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

    __slots__ = ("_stream",)

    def __init__(self, stream: MemoryObjectSendStream[ToolProgress]) -> None:
        self._stream = stream

    def __call__(self, event: ToolProgress) -> None:
        try:
            self._stream.send_nowait(event)
        except (anyio.WouldBlock, anyio.ClosedResourceError, anyio.BrokenResourceError):
            pass

    async def send(self, event: ToolProgress) -> None:
        try:
            await self._stream.send(event)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            pass


def _sender(stream: MemoryObjectSendStream[ToolProgress]) -> _Sender:
    return _Sender(stream)

"""Running a chain's turn from synchronous code: `Chain.call_sync`, `Chain.stream_sync`."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import TypeVar

import anyio
from anyio.from_thread import start_blocking_portal

from .errors import AdvisorChainError
from .streams import closing_stream

T = TypeVar("T")
E = TypeVar("E")


class SyncInAsyncError(AdvisorChainError, RuntimeError):
    """A `*_sync` entry point was called where an event loop is already running (in a
    coroutine, a notebook cell on an async kernel's loop, an async web handler): it would
    block that loop. Await the async method instead (`await chain.call(...)`)."""


def refuse_in_loop(name: str, instead: str) -> None:
    """Raise `SyncInAsyncError` if this thread is running an async library's event loop."""
    library = _running_library()
    if library is None:
        return
    raise SyncInAsyncError(
        f"{name} cannot run inside a running {library} event loop (it would block it): "
        f"use `{instead}` there"
    )


def _running_library() -> str | None:
    """The async library whose event loop runs in this thread (asyncio or trio), or `None`."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:
        return "asyncio"
    trio = sys.modules.get("trio")  # only a program that imported trio can be running it
    if trio is not None:
        try:
            trio.lowlevel.current_trio_token()
        except RuntimeError:
            return None
        return "trio"
    return None


def run_sync(function: Callable[[], Awaitable[T]]) -> T:
    """Run `function()` to completion on a fresh asyncio event loop in this thread."""

    async def main() -> T:
        return await function()

    return anyio.run(main)


def iterate_sync(open_stream: Callable[[], AsyncIterator[E]]) -> Iterator[E]:
    """Iterate the async stream `open_stream()` from synchronous code.

    The stream runs as one task of an event loop in a helper thread (so its cancel scopes
    and task groups stay in one task) and hands each event over a zero-size channel: it
    runs only as fast as the caller reads. Closing the iterator early (`break`, garbage
    collection) cancels the stream and waits for it to close; an error of the stream is
    raised here after the events that preceded it.
    """
    with start_blocking_portal() as portal:
        send, receive = anyio.create_memory_object_stream[E](0)
        failure: list[BaseException] = []

        async def produce() -> None:
            async with send:
                try:
                    async with closing_stream(open_stream()) as events:
                        async for event in events:
                            await send.send(event)
                except anyio.get_cancelled_exc_class():
                    raise
                except BaseException as exc:  # handed to the reading thread
                    failure.append(exc)

        future = portal.start_task_soon(produce)
        try:
            while True:
                try:
                    event = portal.call(receive.receive)
                except anyio.EndOfStream:
                    break
                yield event
        finally:
            if not future.done():
                future.cancel()
            portal.call(receive.aclose)
        if failure:
            raise failure[0]


__all__ = ["SyncInAsyncError", "iterate_sync", "refuse_in_loop", "run_sync"]

"""A tool call's progress: the server's notifications, the clock they restart, and which
chain calls are running on a connection."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, TypeAlias

import anyio

if TYPE_CHECKING:
    from mcp.shared.dispatcher import ProgressFnT

ProgressCallback: TypeAlias = Callable[[float, "float | None", "str | None"], None]
"""`(progress, total, message)` for each progress notification of one call."""

_MAX_PROGRESS_MESSAGE = 1000


def silence_deadline(timeout: float | None) -> float:
    """The deadline of a clock that fires after `timeout` s of silence (`None`: never)."""
    return math.inf if timeout is None else anyio.current_time() + timeout


def progress_listener(
    clock: anyio.CancelScope, timeout: float | None, on_progress: ProgressCallback | None
) -> ProgressFnT:
    """The SDK's progress callback for one call: each notification moves `clock`'s
    deadline `timeout` s on (progress counts as activity) and reaches `on_progress`,
    its message bounded."""

    async def notified(progress: float, total: float | None, message: str | None) -> None:
        if timeout is not None:
            clock.deadline = anyio.current_time() + timeout
        if on_progress is not None:
            text = str(message)[:_MAX_PROGRESS_MESSAGE] if message is not None else None
            on_progress(float(progress), None if total is None else float(total), text)

    return notified


class RunningCalls:
    """The chain tool calls running on one connection (call id -> how many), so that a
    server's question can name the call it came during."""

    def __init__(self) -> None:
        self._counts: dict[str, int] = {}

    @contextmanager
    def running(self, call_id: str) -> Iterator[None]:
        """Count `call_id` as running while the block runs."""
        self._counts[call_id] = self._counts.get(call_id, 0) + 1
        try:
            yield
        finally:
            if self._counts[call_id] == 1:
                del self._counts[call_id]
            else:
                self._counts[call_id] -= 1

    def only(self) -> str | None:
        """The id of the one call running, if just one is (once)."""
        if len(self._counts) == 1:
            ((call_id, count),) = self._counts.items()
            if count == 1:
                return call_id
        return None


__all__ = ["ProgressCallback", "RunningCalls", "progress_listener", "silence_deadline"]

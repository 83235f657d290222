"""`LoopLock`: an `anyio.Lock` for whichever event loop is running."""

from __future__ import annotations

import anyio
import anyio.lowlevel


class LoopLock:
    """One `anyio.Lock` per event loop, made on first use in that loop.

    anyio locks belong to the loop that made them, so an object used from one loop and
    then another (a test on asyncio, then on trio) gets a fresh lock in the second.
    `async with lock():` holds it."""

    def __init__(self) -> None:
        self._lock: anyio.Lock | None = None
        self._loop: object = None

    def __call__(self) -> anyio.Lock:
        loop = anyio.lowlevel.current_token()
        if self._lock is None or self._loop != loop:
            self._lock = anyio.Lock()
            self._loop = loop
        return self._lock


__all__ = ["LoopLock"]

"""The worker-thread runner of the SQL stores: blocking work off the event loop.

The stores use blocking drivers (`sqlite3`, psycopg's blocking connections) in
`anyio.to_thread`, so they work under asyncio and trio alike.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from functools import partial
from typing import TypeVar

import anyio.to_thread

T = TypeVar("T")


class WorkerRunner:
    """Runs blocking calls in anyio worker threads, after `setup` has run once.

    `setup` (creating tables) runs in the first call's thread, under a lock, so concurrent
    first calls wait for it; if it raises, the next call tries again. `refuse` is called
    before every call and raises when the store cannot be used (closed).
    """

    def __init__(self, setup: Callable[[], None], refuse: Callable[[], None] | None = None) -> None:
        self._setup = setup
        self._refuse = refuse
        self._ready = False
        self._lock = threading.Lock()

    async def run(self, fn: Callable[..., T], *args: object) -> T:
        """`fn(*args)` in a worker thread, once the setup has run."""
        return await anyio.to_thread.run_sync(partial(self.run_sync, fn, *args))

    def run_sync(self, fn: Callable[..., T], *args: object) -> T:
        """`fn(*args)` in the calling thread, once the setup has run."""
        if self._refuse is not None:
            self._refuse()
        if not self._ready:
            with self._lock:
                if not self._ready:
                    self._setup()
                    self._ready = True
        return fn(*args)


__all__ = ["WorkerRunner"]

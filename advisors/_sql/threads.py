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

from ...core.errors import AdvisorChainError

T = TypeVar("T")

_DAMAGED = (ValueError, TypeError, LookupError, AttributeError, RecursionError, OverflowError)
"""What reading a damaged row raises (`JSONDecodeError`, `ValidationError` and
`UnicodeDecodeError` are `ValueError`s, `KeyError` a `LookupError`)."""


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

    async def run_checked(
        self, fn: Callable[[], T], error: type[AdvisorChainError], store: str
    ) -> T:
        """`fn()` as `run` does; a row another writer damaged (or a value JSON cannot hold)
        raises `error`, naming the `store` but neither the row nor the value. The package's
        own errors pass through."""
        try:
            return await self.run(fn)
        except AdvisorChainError:
            raise
        except _DAMAGED as exc:
            failure = error(
                f"{store} cannot read or write a record ({type(exc).__name__}): "
                "a stored row is damaged or a value is not JSON"
            )
        raise failure

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

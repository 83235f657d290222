"""`IdleConnections`: the idle list, lock and closing that both connection pools share."""

from __future__ import annotations

import threading
from typing import Generic, Protocol, TypeVar


class _Closable(Protocol):
    def close(self) -> None: ...


C = TypeVar("C", bound=_Closable)


class IdleConnections(Generic[C]):
    """Idle connections kept under a lock; `closed` set once `close()` ran.

    Subclasses decide which connections are kept (`_idle` under `_lock`); closing takes
    the idle list out under the lock and closes its connections outside it.
    """

    def __init__(self) -> None:
        self.closed = False
        self._idle: list[C] = []
        self._lock = threading.Lock()

    def _close_idle(self, *, refuse_more: bool) -> None:
        with self._lock:
            if refuse_more:
                self.closed = True
            idle, self._idle = self._idle, []
        for connection in idle:
            connection.close()


__all__ = ["IdleConnections"]

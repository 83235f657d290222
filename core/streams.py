"""Helpers for async event streams."""

from __future__ import annotations

from collections.abc import AsyncIterator
from types import TracebackType
from typing import Generic, TypeVar

T = TypeVar("T")


class closing_stream(Generic[T]):  # noqa: N801 - used like contextlib.aclosing
    """`async with closing_stream(it) as events:` closes `it` (if it can be closed) on exit.

    Like `contextlib.aclosing`, but typed for any `AsyncIterator`, so an abandoned stream
    closes its upstream (HTTP responses, spans) at once instead of at garbage collection.
    """

    __slots__ = ("_stream",)

    def __init__(self, stream: AsyncIterator[T]) -> None:
        self._stream = stream

    async def __aenter__(self) -> AsyncIterator[T]:
        return self._stream

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        aclose = getattr(self._stream, "aclose", None)
        if aclose is not None:
            await aclose()


__all__ = ["closing_stream"]

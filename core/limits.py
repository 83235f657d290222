"""Limits of an enclosing turn that every model call made inside one of its tool calls
counts against (a `BudgetAdvisor`'s, the tool loop's usage meter): checked by each chain's
innermost model step, so a chain run inside a tool call, as a sub-agent or by hand, is
bounded and counted as it goes."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from .request import ChatRequest
    from .response import ChatResponse


class EnclosingLimit(Protocol):
    """A limit every model call made inside a tool call of an enclosing turn counts against."""

    async def before_model_call(self, request: ChatRequest) -> None:
        """Raise to refuse the call (the limit is used up)."""
        ...

    async def after_model_call(self, request: ChatRequest, response: ChatResponse) -> None:
        """Account for the call's response."""
        ...


_limits: ContextVar[tuple[EnclosingLimit, ...]] = ContextVar(
    "advisorchain_enclosing_limits", default=()
)


def enclosing_limits() -> tuple[EnclosingLimit, ...]:
    """The limits of the turns whose tool calls enclose the current task, outermost first."""
    return _limits.get()


async def before_model_call(limits: tuple[EnclosingLimit, ...], request: ChatRequest) -> None:
    """Ask each enclosing limit, outermost first, before a model call (one may raise)."""
    for limit in limits:
        await limit.before_model_call(request)


async def after_model_call(
    limits: tuple[EnclosingLimit, ...], request: ChatRequest, response: ChatResponse
) -> None:
    """Account a model call's response to each enclosing limit."""
    for limit in limits:
        await limit.after_model_call(request, response)


@contextmanager
def bounded_by(limit: EnclosingLimit) -> Iterator[None]:
    """Within the block (a tool call), every model call counts against `limit` too."""
    token = _limits.set((*_limits.get(), limit))
    try:
        yield
    finally:
        _limits.reset(token)


__all__ = [
    "EnclosingLimit",
    "after_model_call",
    "before_model_call",
    "bounded_by",
    "enclosing_limits",
]

"""Model-call watchers: what an enclosing piece of work (one of a turn's tool calls) asks
to see of every model call made inside it, by any chain, however it is run.

A tool may run a chain of its own: as a sub-agent (`chain_tool`) or by hand
(`await other.call(...)` in its body). Such a chain has none of the enclosing chain's
links, so only the step every chain shares, the innermost one that calls the model,
can show its model calls to the enclosing turn. Core keeps this one generic hook and
knows nothing of what a watcher does (counting usage, refusing calls over a limit: the
advisors that install watchers say what for); a link that calls a model itself, not
through a chain, reports its calls to the watchers the same way.

Control flow: `watched_by(w)` installs `w` for the block (a context variable: tasks
started inside it inherit it). Each model call made while watchers are installed runs
`before_model_call` of each, outermost first (one may raise: the call is not made and
the error is the call's), then the call, then `after_model_call` of each with the
response (not for a call that failed). A chain without watchers pays one context
variable read per model call.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from .request import ChatRequest
    from .response import ChatResponse


class ModelCallWatcher(Protocol):
    """Sees every model call made inside the block it watches (see the module docstring)."""

    async def before_model_call(self, request: ChatRequest) -> None:
        """Before the call: raise to refuse it (the error is the call's)."""
        ...

    async def after_model_call(self, request: ChatRequest, response: ChatResponse) -> None:
        """After the call answered: `response` is what the model answered."""
        ...


_watchers: ContextVar[tuple[ModelCallWatcher, ...]] = ContextVar(
    "advisorchain_model_call_watchers", default=()
)


def model_call_watchers() -> tuple[ModelCallWatcher, ...]:
    """The watchers installed around the current task, outermost first."""
    return _watchers.get()


async def notify_before(watchers: tuple[ModelCallWatcher, ...], request: ChatRequest) -> None:
    """Run each watcher's `before_model_call`, outermost first (one may raise)."""
    for watcher in watchers:
        await watcher.before_model_call(request)


async def notify_after(
    watchers: tuple[ModelCallWatcher, ...], request: ChatRequest, response: ChatResponse
) -> None:
    """Run each watcher's `after_model_call` with the call's response, outermost first."""
    for watcher in watchers:
        await watcher.after_model_call(request, response)


@contextmanager
def watched_by(watcher: ModelCallWatcher) -> Iterator[None]:
    """Within the block, every model call is shown to `watcher` too (after those
    installed around the block)."""
    token = _watchers.set((*_watchers.get(), watcher))
    try:
        yield
    finally:
        _watchers.reset(token)


__all__ = [
    "ModelCallWatcher",
    "model_call_watchers",
    "notify_after",
    "notify_before",
    "watched_by",
]

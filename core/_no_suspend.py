"""Whether calling an async function can ever suspend, read from its bytecode.

A coroutine suspends only at a yield of its own frame: an `await`, `async with` or
`async for` in its own code (what it awaits suspends through that yield). Code with none
of those instructions runs to its end in the first step, whatever it calls: the tool
loop runs a round of such calls without a task group (`core/manager.py`), which saves
15% of the bare turn (`ToolCallingManager._never_suspend`, measured with
`benchmarks.links_ab`).
"""

from __future__ import annotations

import dis
import inspect
from collections.abc import Callable
from functools import lru_cache, partial
from types import CodeType, FunctionType, MethodType
from typing import Any

# Every instruction that suspends a frame or starts an awaitable's protocol, across the
# CPython versions (an unknown one still needs a YIELD_VALUE to suspend).
_SUSPENDING = frozenset(
    {
        "YIELD_VALUE",
        "INSTRUMENTED_YIELD_VALUE",
        "SEND",
        "GET_AWAITABLE",
        "GET_AITER",
        "GET_ANEXT",
        "BEFORE_ASYNC_WITH",
        "END_ASYNC_FOR",
        "ASYNC_GEN_WRAP",
    }
)


@lru_cache(maxsize=1024)
def _code_never_suspends(code: CodeType) -> bool:
    return not any(i.opname in _SUSPENDING for i in dis.get_instructions(code))


def never_suspends(fn: Callable[..., Any] | None) -> bool:
    """Whether calling `fn` returns a coroutine that cannot suspend: `fn` is a plain
    `async def` function (possibly in `functools.partial`s or a bound method) whose own
    code neither awaits nor iterates or enters anything asynchronously. `False` when
    unsure (any other callable)."""
    while isinstance(fn, partial):
        fn = fn.func
    if isinstance(fn, MethodType):
        fn = fn.__func__
    if type(fn) is not FunctionType:
        return False
    code = fn.__code__
    if not code.co_flags & inspect.CO_COROUTINE:
        return False
    return _code_never_suspends(code)


__all__ = ["never_suspends"]

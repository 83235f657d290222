"""`Advisor`: one link of a chain, and the callable types of the steps it wraps."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, TypeAlias

from .events import StreamEvent
from .invocation import ToolInvocation, ToolResult
from .request import ChatRequest
from .response import ChatResponse
from .tools import Tool

if TYPE_CHECKING:
    from .chain import Chain

CallNext: TypeAlias = Callable[[ChatRequest], Awaitable[ChatResponse]]
"""The rest of the chain after a link, for `call`: reusable, may be called several times."""

StreamNext: TypeAlias = Callable[[ChatRequest], AsyncIterator[StreamEvent]]
"""The rest of the chain after a link, for `stream`."""

ToolNext: TypeAlias = Callable[[ToolInvocation], Awaitable[ToolResult]]
"""The rest of a tool execution after a `call_tool` hook (ends in the tool itself)."""

ToolHook: TypeAlias = Callable[[ToolInvocation, ToolNext], Awaitable[ToolResult]]
"""A `call_tool` hook, bound to its advisor."""

CallFunction: TypeAlias = Callable[[ChatRequest, CallNext], Awaitable[ChatResponse]]
StreamFunction: TypeAlias = Callable[[ChatRequest, StreamNext], AsyncIterator[StreamEvent]]


class Advisor:
    """A link of a `Chain`. Every hook passes through; override only what you need.

    - `call(request, next)`: wraps the rest of the chain for `Chain.call`. Return
      `await next(request)` (possibly with a changed request or a changed response),
      answer without calling `next` (short-circuit), or call `next` several times (loop).
    - `stream(request, next)`: the same for `Chain.stream`, as a plain async generator:
      iterate `next(request)` and yield events on. The stream must end with exactly one
      `ResponseCompleted`.
    - `call_tool(invocation, next)`: wraps one tool execution; the tool loop runs every
      execution through the `call_tool` hooks of all the chain's advisors, in chain order,
      wherever they sit relative to the loop.

    - `call_model(request, next)` / `stream_model(request, next)`: like `call`/`stream`,
      but folded directly around the model, below every advisor, whatever this advisor's
      position: they see each model call of each round of the tool loop. Tracing and
      logging use them to record every model call while their `call` sees the whole turn.

    An advisor that overrides `call` but not `stream` is skipped on the stream path (and
    vice versa): override both when the link must see both.

    `tools` are tools the advisor contributes; the chain attaches them to every request.
    `check_chain` lets an advisor refuse a chain it cannot work in; `bind` tells it the
    chain it was placed in (its model's names, for logs and traces).
    """

    @property
    def name(self) -> str:
        """A short name for logs and errors."""
        return type(self).__name__

    @property
    def tools(self) -> Sequence[Tool]:
        """Tools this advisor adds to every request of its chain."""
        return ()

    def check_chain(self, advisors: Sequence[Advisor], position: int) -> None:
        """Raise `ChainConfigurationError` if this advisor cannot work at `position`."""

    def bind(self, chain: Chain) -> None:
        """Called by every `Chain` this advisor is placed in, once the chain is built.

        Lets a link learn what only the chain knows, such as its model's `model_name` and
        `provider_name`. An advisor placed in several chains is bound to each of them.
        """

    async def call(self, request: ChatRequest, next: CallNext) -> ChatResponse:
        """Wrap the rest of the chain (non-streaming)."""
        return await next(request)

    async def stream(self, request: ChatRequest, next: StreamNext) -> AsyncIterator[StreamEvent]:
        """Wrap the rest of the chain (streaming)."""
        async for event in next(request):
            yield event

    async def call_tool(self, invocation: ToolInvocation, next: ToolNext) -> ToolResult:
        """Wrap one tool execution."""
        return await next(invocation)

    async def call_model(self, request: ChatRequest, next: CallNext) -> ChatResponse:
        """Wrap each model call (non-streaming), innermost, below every advisor."""
        return await next(request)

    async def stream_model(
        self, request: ChatRequest, next: StreamNext
    ) -> AsyncIterator[StreamEvent]:
        """Wrap each model call (streaming), innermost, below every advisor."""
        async for event in next(request):
            yield event


def overrides(advisor: Advisor, hook: str) -> bool:
    """Whether `advisor` replaces the base class's pass-through `hook`."""
    return getattr(type(advisor), hook) is not getattr(Advisor, hook)


class _FunctionAdvisor(Advisor):
    def __init__(
        self,
        call: CallFunction | None,
        stream: StreamFunction | None,
        call_tool: ToolHook | None,
        name: str | None,
    ) -> None:
        self._call = call
        self._stream = stream
        self._call_tool = call_tool
        fn = call or stream or call_tool
        self._name: str = name or str(getattr(fn, "__name__", "advisor"))

    @property
    def name(self) -> str:
        return self._name

    def __repr__(self) -> str:
        return f"advisor({self._name})"


def advisor(
    call: CallFunction | None = None,
    *,
    stream: StreamFunction | None = None,
    call_tool: ToolHook | None = None,
    name: str | None = None,
) -> Advisor:
    """Make an advisor from plain functions: `advisor(async def fn(request, next))`.

    Usable as a decorator. Give `stream=` and/or `call_tool=` for those hooks; a hook not
    given passes through.
    """
    if call is None and stream is None and call_tool is None:
        raise TypeError("advisor() needs at least one of call, stream, call_tool")
    hooks: dict[str, object] = {}
    if call is not None:

        async def call_hook(
            self: _FunctionAdvisor, request: ChatRequest, next: CallNext
        ) -> ChatResponse:
            assert self._call is not None
            return await self._call(request, next)

        hooks["call"] = call_hook
    if stream is not None:

        def stream_hook(
            self: _FunctionAdvisor, request: ChatRequest, next: StreamNext
        ) -> AsyncIterator[StreamEvent]:
            assert self._stream is not None
            return self._stream(request, next)

        hooks["stream"] = stream_hook
    if call_tool is not None:

        async def tool_hook(
            self: _FunctionAdvisor, invocation: ToolInvocation, next: ToolNext
        ) -> ToolResult:
            assert self._call_tool is not None
            return await self._call_tool(invocation, next)

        hooks["call_tool"] = tool_hook
    cls = type("FunctionAdvisor", (_FunctionAdvisor,), hooks)
    instance: Advisor = cls(call, stream, call_tool, name)
    return instance

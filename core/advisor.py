"""`Advisor`: one link of a chain, and the callable types of the steps it wraps."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, Protocol, TypeAlias

from .checks import require_callable
from .events import StreamEvent
from .invocation import ToolHook as ToolHook
from .invocation import ToolInvocation, ToolResult
from .invocation import ToolNext as ToolNext
from .model import ChatModel
from .request import ChatRequest
from .response import ChatResponse
from .tools import Tool

if TYPE_CHECKING:
    from .manager import ToolCallingManager

CallNext: TypeAlias = Callable[[ChatRequest], Awaitable[ChatResponse]]
"""The rest of the chain after a link, for `call`: reusable, may be called several times."""

StreamNext: TypeAlias = Callable[[ChatRequest], AsyncIterator[StreamEvent]]
"""The rest of the chain after a link, for `stream`."""

CallFunction: TypeAlias = Callable[[ChatRequest, CallNext], Awaitable[ChatResponse]]
StreamFunction: TypeAlias = Callable[[ChatRequest, StreamNext], AsyncIterator[StreamEvent]]
BeforeFunction: TypeAlias = Callable[[ChatRequest], Awaitable[ChatRequest]]
AfterFunction: TypeAlias = Callable[[ChatResponse], Awaitable[ChatResponse]]

PATH_PAIRS: tuple[tuple[str, str], ...] = (("call", "stream"), ("call_model", "stream_model"))
"""Hooks that come in pairs: one for `Chain.call`, its twin for `Chain.stream`."""


class ChainView(Protocol):
    """What an advisor may read of the chain it is bound to (`Placement.chain`).

    `advisors` and `model` are set while the chain binds its links; `tool_hooks` (every
    link's `call_tool` hook, in chain order: the path each tool execution takes) once the
    chain is built, so read it when the chain runs, not in `bind`.
    """

    @property
    def advisors(self) -> tuple[Advisor, ...]: ...

    @property
    def model(self) -> ChatModel: ...

    @property
    def model_name(self) -> str | None: ...

    @property
    def provider_name(self) -> str | None: ...

    @property
    def tool_hooks(self) -> tuple[ToolHook, ...]: ...


@dataclass(frozen=True, slots=True)
class Placement:
    """Where an advisor sits in one chain: what `Advisor.bind` receives.

    `index` is its position in `chain.advisors` (0 is the outermost link);
    `inside_tool_loop` is whether an earlier link runs the tool loop (an advisor whose
    `tool_loop` is set, such as `ToolCallingAdvisor`): then its `call`/`stream` hooks,
    and `before`/`after`, see every round rather than the whole turn once. `chain` is
    still being built: its `advisors` and `model` (and the model's names) are set, its
    `tool_hooks` once it is built.
    """

    chain: ChainView
    index: int
    inside_tool_loop: bool


class Advisor:
    """A link of a `Chain`. Every hook passes through; override only what you need.

    - `before(request)` / `after(response)`: rewrite the request on its way in, the
      response on its way out. The chain applies both on both paths: on the stream path
      `after` transforms the response carried by `ResponseCompleted` (the deltas before
      it pass unchanged). Most links need nothing else.
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

    Control flow of one link: `before`, then its `call` (or `stream`), which calls
    `next`, then `after`. `call` and `stream` come as a pair, as do `call_model` and
    `stream_model`: a `Chain` refuses (`ChainConfigurationError`) an advisor that
    overrides one of a pair but not the other, because one path would silently skip it.
    An advisor meant for one path only says so with `single_path = True`; the chain then
    accepts it and logs a warning naming the path that skips it.

    `tools` are tools the advisor contributes; the chain attaches them to every request.
    `bind` is called once per chain the advisor is placed in, with its `Placement`: it
    may refuse the place, and returns the link that chain runs (the advisor itself, or a
    copy holding what differs per chain), so one instance works in several chains.
    """

    single_path: ClassVar[bool] = False
    """Set to `True` on an advisor that deliberately wraps only `call` or only `stream`
    (or only one of `call_model`/`stream_model`); otherwise the chain refuses it."""

    @property
    def name(self) -> str:
        """A short name for logs and errors."""
        return type(self).__name__

    @property
    def tools(self) -> Sequence[Tool]:
        """Tools this advisor adds to every request of its chain."""
        return ()

    @property
    def tool_loop(self) -> ToolCallingManager | None:
        """The manager of the tool loop this link runs, if it runs one (links after it are
        inside the loop); `None` for every other advisor."""
        return None

    def bind(self, placement: Placement) -> Advisor:
        """Called by every `Chain` this advisor is placed in, once, while it is built.

        Raise `ChainConfigurationError` to refuse the place (`placement.inside_tool_loop`
        says where it is). Return the link this chain runs: `self` (the default), or a copy
        that holds what differs per chain, such as whether it wraps a turn or a round and
        the names of `placement.chain`'s model. The chain keeps the advisor you gave it in
        `chain.advisors` and runs the returned link's hooks.
        """
        return self

    async def before(self, request: ChatRequest) -> ChatRequest:
        """Rewrite the request on its way in (both paths)."""
        return request

    async def after(self, response: ChatResponse) -> ChatResponse:
        """Rewrite the response on its way out (both paths; on the stream path, the
        response of `ResponseCompleted`)."""
        return response

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


def one_sided(advisor: Advisor) -> tuple[str, str] | None:
    """The first hook pair of which `advisor` overrides one side only: `(given, missing)`."""
    for first, second in PATH_PAIRS:
        has_first, has_second = overrides(advisor, first), overrides(advisor, second)
        if has_first != has_second:
            return (first, second) if has_first else (second, first)
    return None


class FunctionAdvisor(Advisor):
    """An advisor made by `advisor()` from plain functions."""

    def __init__(self, functions: dict[str, Callable[..., object]], name: str | None) -> None:
        self._functions = functions
        fn = next(iter(functions.values()))
        self._name: str = name or str(getattr(fn, "__name__", "advisor"))

    @property
    def name(self) -> str:
        return self._name

    def __repr__(self) -> str:
        return f"advisor({self._name})"


async def _call_hook(self: FunctionAdvisor, request: ChatRequest, next: CallNext) -> ChatResponse:
    call: CallFunction = self._functions["call"]  # type: ignore[assignment]
    return await call(request, next)


def _stream_hook(
    self: FunctionAdvisor, request: ChatRequest, next: StreamNext
) -> AsyncIterator[StreamEvent]:
    stream: StreamFunction = self._functions["stream"]  # type: ignore[assignment]
    return stream(request, next)


async def _tool_hook(
    self: FunctionAdvisor, invocation: ToolInvocation, next: ToolNext
) -> ToolResult:
    call_tool: ToolHook = self._functions["call_tool"]  # type: ignore[assignment]
    return await call_tool(invocation, next)


async def _before_hook(self: FunctionAdvisor, request: ChatRequest) -> ChatRequest:
    before: BeforeFunction = self._functions["before"]  # type: ignore[assignment]
    return await before(request)


async def _after_hook(self: FunctionAdvisor, response: ChatResponse) -> ChatResponse:
    after: AfterFunction = self._functions["after"]  # type: ignore[assignment]
    return await after(response)


_FUNCTION_HOOKS: dict[str, object] = {
    "before": _before_hook,
    "after": _after_hook,
    "call": _call_hook,
    "stream": _stream_hook,
    "call_tool": _tool_hook,
}


def advisor(
    call: CallFunction | None = None,
    *,
    stream: StreamFunction | None = None,
    before: BeforeFunction | None = None,
    after: AfterFunction | None = None,
    call_tool: ToolHook | None = None,
    name: str | None = None,
    single_path: bool = False,
) -> Advisor:
    """Make an advisor from plain functions.

    `advisor(before=fn)` with `async def fn(request) -> ChatRequest`, and/or `after=` with
    `async def fn(response) -> ChatResponse`: applied on both paths. `call=` (or
    `@advisor` on `async def fn(request, next)`) wraps `Chain.call` and needs its twin
    `stream=` (a `Chain` refuses one without the other unless `single_path=True`).
    `call_tool=` wraps every tool execution. A hook not given passes through.
    """
    given = {
        "before": before,
        "after": after,
        "call": call,
        "stream": stream,
        "call_tool": call_tool,
    }
    functions: dict[str, Callable[..., object]] = {k: f for k, f in given.items() if f is not None}
    for hook, function in functions.items():
        require_callable(function, f"advisor({hook}=...)", f"the {hook} hook")
    if not functions:
        raise TypeError("advisor() needs at least one of before, after, call, stream, call_tool")
    hooks: dict[str, object] = {hook: _FUNCTION_HOOKS[hook] for hook in functions}
    hooks["single_path"] = single_path
    cls = type("FunctionAdvisor", (FunctionAdvisor,), hooks)
    instance: Advisor = cls(functions, name)
    return instance


__all__ = [
    "PATH_PAIRS",
    "Advisor",
    "AfterFunction",
    "BeforeFunction",
    "CallFunction",
    "CallNext",
    "ChainView",
    "FunctionAdvisor",
    "Placement",
    "StreamFunction",
    "StreamNext",
    "advisor",
    "one_sided",
    "overrides",
]

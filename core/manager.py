"""`ToolCallingManager`: executes the tool calls of one model response.

It is the machinery of `ToolCallingAdvisor`, public so that users can drive the loop by
hand: parse and validate arguments, enforce call limits, run each call through the
chain's `call_tool` hooks, convert results, and answer every call with exactly one tool
message.
"""

from __future__ import annotations

import time
import types
from collections import Counter
from collections.abc import (
    AsyncIterator,
    Awaitable,
    Callable,
    Coroutine,
    Generator,
    Iterator,
    Mapping,
    Sequence,
)
from contextvars import Context, copy_context
from dataclasses import dataclass, replace
from typing import Any, Literal, TypeAlias, TypeVar

import anyio

from .arguments import ArgumentsError, parse_arguments
from .checks import require_mapping, require_number
from .context import ToolContext
from .deferred import Approve, Reject, Result, Waiting
from .errors import (
    ResumeConflict,
    ToolCallLimitExceeded,
    ToolExecutionError,
)
from .invocation import ToolHook, ToolInvocation, ToolNext, ToolResult
from .messages import AssistantMessage, ToolCall, ToolMessage
from .progress import CallFinished, call_finished
from .request import ChatRequest
from .scrub import describe_exception
from .tools import InvalidToolArguments, Tool, ValidatedArguments

EFFECTS = "advisorchain.effects"
"""`request.context` key: a list that a caller puts there (`FallbackModel` does) to learn
which tool calls of the turn started with a possible effect: `ToolCallingManager.invoke`
appends each call of a tool that is neither `read_only` nor `idempotent` as it starts."""

ToolErrorHandler: TypeAlias = Callable[[BaseException, ToolInvocation], str]
"""Maps a tool's exception to the text the model reads (or raises to stop the turn)."""


@dataclass(frozen=True, slots=True)
class ToolRound:
    """The outcome of executing one response's tool calls, in call order."""

    calls: tuple[ToolCall, ...]
    results: tuple[ToolResult, ...]
    messages: tuple[ToolMessage, ...]
    durations: tuple[float, ...]

    @property
    def return_direct(self) -> bool:
        """Whether every call succeeded with a return-direct tool: the results are the answer."""
        return bool(self.results) and all(r.return_direct and not r.is_error for r in self.results)

    @property
    def direct_answer(self) -> str:
        """The results joined as the answer of a return-direct round."""
        return "\n\n".join(r.text for r in self.results)


class ToolCallingManager:
    """Executes tool calls with validation, limits, hooks, timeouts and result conversion.

    - `max_calls_per_tool` / `max_calls`: limits per turn, counted from the last user
      message; `tool_limits` overrides the per-tool limit by name. Over a limit,
      `on_limit="raise"` raises `ToolCallLimitExceeded` (nothing of that round runs);
      `on_limit="report"` answers the offending calls with an error and runs the rest.
    - `on_tool_error`: `"report"` turns an exception into an error result the model
      reads (type and message, paths redacted); `"raise"` raises `ToolExecutionError`;
      a callable maps the exception to the text the model reads (or raises).
    - `max_concurrency`: how many calls of one round run at once (default: all).
      A `sequential` tool's call runs alone: the calls before it in the round finish
      first, the calls after it start once it ended.
    - `tool_timeout`: seconds per call, for tools without their own `timeout`.

    A tool that returns a `deferred` `ToolResult` (`ToolResult.defer`) answers its call
    with it as it is. `settle` runs a resumed turn's decided calls (`core/deferred.py`).

    A tool that returns an iterator (a generator, an async generator, `map(...)`) gets
    an error result naming it (`on_tool_error` applies): converting it would drain it
    on the event loop, outside the tool's timeout, and it may never end.

    What a call raises past these (a `BaseException` such as `SystemExit` or
    `KeyboardInterrupt`, or an exception from a `call_tool` hook) cancels the round's
    other calls and reaches the caller as itself, never inside an exception group,
    however many calls the round has; if several raise, the first in call order.
    """

    def __init__(
        self,
        *,
        max_calls_per_tool: int = 40,
        max_calls: int = 150,
        tool_limits: Mapping[str, int] | None = None,
        on_limit: Literal["raise", "report"] = "raise",
        on_tool_error: Literal["report", "raise"] | ToolErrorHandler = "report",
        max_concurrency: int | None = None,
        tool_timeout: float | None = None,
    ) -> None:
        if on_limit not in ("raise", "report"):
            raise ValueError("on_limit must be 'raise' or 'report'")
        if not callable(on_tool_error) and on_tool_error not in ("report", "raise"):
            raise ValueError("on_tool_error must be 'report', 'raise' or a callable")
        require_number(max_concurrency, "max_concurrency", minimum=1, integer=True, optional=True)
        require_number(max_calls_per_tool, "max_calls_per_tool", minimum=0, integer=True)
        require_number(max_calls, "max_calls", minimum=0, integer=True)
        require_number(tool_timeout, "tool_timeout", positive=True, optional=True)
        if tool_limits is not None:
            require_mapping(tool_limits, "tool_limits", "tool name -> most calls per turn")
            for name, limit in tool_limits.items():
                require_number(limit, f"tool_limits[{name!r}]", minimum=0, integer=True)
        self.max_calls_per_tool = max_calls_per_tool
        self.max_calls = max_calls
        self.tool_limits = dict(tool_limits or {})
        self.on_limit = on_limit
        self.on_tool_error = on_tool_error
        self.max_concurrency = max_concurrency
        self.tool_timeout = tool_timeout
        self._pipelines: dict[tuple[ToolHook, ...], ToolNext] = {}

    async def execute(
        self,
        request: ChatRequest,
        message: AssistantMessage,
        *,
        hooks: tuple[ToolHook, ...] = (),
    ) -> ToolRound:
        """Execute the tool calls of `message`, which answered `request`.

        Each runnable call goes through `hooks` (`call_tool` hooks, outermost first: a
        bound `ToolCallingAdvisor` passes its chain's `tool_hooks`), then the tool.
        Returns one result and one tool message per call, in call order.
        """
        calls = message.tool_calls
        over_limit = self._over_limit(request, calls)
        if over_limit and self.on_limit == "raise":
            name, why = next(iter(over_limit.values()))
            results = [ToolResult(content=f"Not executed: {why}.", outcome="limit") for _ in calls]
            raise ToolCallLimitExceeded(
                f"tool call limit exceeded: {why}",
                tool_name=name,
                messages=(message, *(r.to_message(c) for r, c in zip(results, calls, strict=True))),
            )
        slots: list[ToolResult | None] = [None] * len(calls)
        durations = [0.0] * len(calls)
        resolved: list[tuple[int, Tool, ValidatedArguments, Any]] = []
        for i, call in enumerate(calls):
            if i in over_limit:
                slots[i] = ToolResult(
                    content=f"Error: not executed, {over_limit[i][1]}. Answer with what you have.",
                    outcome="limit",
                )
                continue
            checked = self._resolve(request, call)
            if isinstance(checked, ToolResult):
                slots[i] = checked
            else:
                resolved.append((i, *checked))
        if resolved:
            # Built once the round's runnable calls are known (not copied afterwards).
            round_calls = tuple(calls[i] for i, *_ in resolved)
            pending = [
                (i, self._invocation(request, calls[i], tool, arguments, validated, round_calls))
                for i, tool, arguments, validated in resolved
            ]
            if not hooks and self._never_suspend(pending):
                _run_inline(self.invoke, pending, slots, durations)
            else:
                await self._run_all(self.pipeline(hooks), pending, slots, durations)
        return _round(calls, slots, durations)

    def prepare(self, request: ChatRequest, call: ToolCall) -> ToolInvocation | ToolResult:
        """Resolve and validate one call: an invocation ready to run, or an error result."""
        checked = self._resolve(request, call)
        if isinstance(checked, ToolResult):
            return checked
        return self._invocation(request, call, *checked, ())

    def _resolve(
        self, request: ChatRequest, call: ToolCall
    ) -> tuple[Tool, ValidatedArguments, Any] | ToolResult:
        """The tool, parsed arguments and validated form of one call, or an error result."""
        tool = request.find_tool(call.name)
        if tool is None:
            names = ", ".join(t.name for t in request.tools[:30]) or "none"
            return ToolResult(
                content=f"Error: unknown tool {call.name!r}. Available tools: {names}.",
                outcome="unknown_tool",
            )
        try:
            arguments = parse_arguments(call.arguments)
        except ArgumentsError as exc:
            return ToolResult(
                content=f"Error: the arguments of {call.name!r} are {exc}. Send a JSON object.",
                outcome="invalid",
            )
        if not isinstance(arguments, dict):
            return ToolResult(
                content=f"Error: the arguments of {call.name!r} must be a JSON object, "
                f"not {type(arguments).__name__}.",
                outcome="invalid",
            )
        try:
            checked = tool.check_arguments(arguments)
        except InvalidToolArguments as exc:
            return ToolResult(
                content=f"Error: invalid arguments for {call.name!r}: {exc}", outcome="invalid"
            )
        return tool, checked, checked.validated

    @staticmethod
    def _invocation(
        request: ChatRequest,
        call: ToolCall,
        tool: Tool,
        arguments: ValidatedArguments,
        validated: Any,
        round_calls: tuple[ToolCall, ...],
    ) -> ToolInvocation:
        context = ToolContext(
            request.tool_context,
            call_id=call.id,
            tool_name=tool.name,
            conversation_id=request.conversation_id,
        )
        return ToolInvocation(
            tool=tool,
            call=call,
            arguments=arguments,
            context=context,
            request=request,
            validated=validated,
            round_calls=round_calls,
        )

    def _over_limit(
        self, request: ChatRequest, calls: Sequence[ToolCall]
    ) -> dict[int, tuple[str, str]]:
        earlier: list[ToolCall] = []  # this turn's calls so far: since the last user message
        for m in reversed(request.messages):
            if m.role == "assistant":  # `Message`'s tag
                earlier.extend(m.tool_calls)
            elif m.role == "user":
                break
        lowest = min(self.max_calls_per_tool, self.max_calls, *self.tool_limits.values())
        if len(earlier) + len(calls) <= lowest:  # the common case: nowhere near a limit
            return {}
        counts = Counter(c.name for c in earlier)
        total = len(earlier)
        over: dict[int, tuple[str, str]] = {}
        for i, call in enumerate(calls):
            counts[call.name] += 1
            total += 1
            limit = self.tool_limits.get(call.name, self.max_calls_per_tool)
            if counts[call.name] > limit:
                over[i] = (call.name, f"{call.name!r} may be called at most {limit} times per turn")
            elif total > self.max_calls:
                over[i] = (call.name, f"at most {self.max_calls} tool calls per turn")
        return over

    def pipeline(self, hooks: tuple[ToolHook, ...]) -> ToolNext:
        """The execution path through `hooks` (outermost first) down to the tool."""
        cached = self._pipelines.get(hooks)
        if cached is not None:
            return cached
        step: ToolNext = self.invoke
        for hook in reversed(hooks):
            step = _wrap(hook, step)
        if len(self._pipelines) > 64:
            self._pipelines.clear()
        self._pipelines[hooks] = step
        return step

    def _never_suspend(self, pending: list[tuple[int, ToolInvocation]]) -> bool:
        """Whether no call of `pending` can suspend: this class's `invoke` (no hooks run
        first; a subclass's own `invoke` may suspend, hence the `_INVOKE` check) of tools
        whose code cannot (`Tool._never_suspends`), more than one of them and none
        `sequential` (one call, or segments, take `_run_all`'s own paths). Such a round
        runs in `_run_inline`, without a task group.

        Speed, measured alone (`benchmarks.links_ab`, this path against `_run_all` for
        every round, one run interleaved, 7 Dec 2026, CPU median): the bare turn takes
        149 us with it and 175 us without, so it saves 15% of the bare turn."""
        if len(pending) < 2 or self.max_concurrency or type(self).invoke is not _INVOKE:
            return False
        for _, invocation in pending:
            tool = invocation.tool
            if tool.sequential or not tool._never_suspends():
                return False
        return True

    async def _run_all(
        self,
        run: ToolNext,
        pending: list[tuple[int, ToolInvocation]],
        slots: list[ToolResult | None],
        durations: list[float],
    ) -> None:
        """Run `pending` through `run`, each call in a copy of this task's context, its
        result and duration into `slots` and `durations`: a lone call in this task; a
        round with a `sequential` call segment by segment; other rounds concurrently.

        Calls are stepped by hand (`_drive`): a lone call and the calls of a round that
        end without suspending need no task, and no task group for a lone call. Speed,
        measured alone (`benchmarks.links_ab`, against one task per call in a task group,
        one run interleaved, 7 Dec 2026, CPU median): the bare turn takes 149 us with it
        and 204 us without, so it saves 27% of the bare turn."""
        if len(pending) == 1:
            i, invocation = pending[0]
            listener, context = _listened(copy_context())
            start = time.perf_counter()
            slots[i] = await _drive(_awaited(run(invocation)), context)
            durations[i] = time.perf_counter() - start
            if listener is not None:
                listener(i, slots[i], durations[i])
            return
        for _, invocation in pending:
            if invocation.tool.sequential:
                for segment in _segments(pending):
                    await self._run_all(run, segment, slots, durations)
                return
        failures: list[tuple[int, BaseException]] = []
        limiter = anyio.CapacityLimiter(self.max_concurrency) if self.max_concurrency else None

        async def run_one(i: int, invocation: ToolInvocation, scope: anyio.CancelScope) -> None:
            listener = call_finished.get()  # this round's; the call's own rounds get none
            if listener is not None:
                call_finished.set(None)  # (each call runs in a context of its own)
            start = time.perf_counter()
            try:
                if limiter is None:
                    slots[i] = await run(invocation)
                else:
                    async with limiter:
                        slots[i] = await run(invocation)
            except BaseException as exc:  # SystemExit & co. too: never into the task group
                # (the backend's cancellation class is looked up only when something raised)
                if isinstance(exc, anyio.get_cancelled_exc_class()):
                    raise
                failures.append((i, exc))
                scope.cancel()
            finally:
                durations[i] = time.perf_counter() - start
            result = slots[i]
            if listener is not None and result is not None:
                listener(i, result, durations[i])

        async with anyio.create_task_group() as group:
            scope = group.cancel_scope
            if limiter is not None:
                for i, invocation in pending:
                    group.start_soon(run_one, i, invocation, scope)
            else:
                # Calls start in order, each when the previous one first suspends (or ends),
                # as with one task per call; but a call that ends without ever suspending
                # needs no task: it runs to its end right here. The first suspending call
                # goes on in this task; the calls after it get tasks. Each call runs in a
                # copy of the context taken now, as a task started now would, so what a
                # tool sets in a context variable stays its own.
                contexts = [copy_context() for _ in pending]
                for position, (i, invocation) in enumerate(pending):
                    context = contexts[position]
                    coro = run_one(i, invocation, scope)
                    try:
                        suspended = context.run(coro.send, None)
                    except StopIteration:
                        if failures:  # the others are cancelled: they do not start
                            break
                        continue
                    for later, (j, other) in enumerate(pending[position + 1 :], position + 1):
                        group.start_soon(_run_in, run_one(j, other, scope), contexts[later])
                    await _drive(coro, context, suspended)
                    break
        if failures:
            # The exception itself, never a group, whichever call raised: as in a 1-call round.
            raise min(failures, key=lambda f: f[0])[1]

    async def invoke(self, invocation: ToolInvocation) -> ToolResult:
        """Run one invocation's tool (the innermost step below every `call_tool` hook).

        A resumed call's `decision` that no hook settled applies here: `Reject(reason)`
        answers it without running the tool, `Result(value)` answers it with `value`
        converted as the tool's return value, `Approve(arguments=...)` runs the tool
        with those arguments; `Approve()` and a nested turn's decisions run it as is.
        """
        if invocation.decision is not None:
            settled = self._decided(invocation)
            if isinstance(settled, ToolResult):
                return settled
            invocation = settled
        tool = invocation.tool
        arguments = invocation.arguments
        if type(arguments) is ValidatedArguments and arguments.tool is tool:
            validated = arguments.validated  # never a stale `invocation.validated`
        else:
            checked = _checked(invocation)
            if isinstance(checked, ToolResult):
                return checked
            invocation = checked
            validated = checked.validated
        if not (tool.read_only or tool.idempotent):
            effects = invocation.request.context.get(EFFECTS)
            if effects is not None:
                effects.append(invocation.call)
        timeout = tool.timeout if tool.timeout is not None else self.tool_timeout
        try:
            if timeout is None:
                value = await tool.run(
                    invocation.arguments, invocation.context, validated=validated
                )
            else:
                with anyio.fail_after(timeout):
                    value = await tool.run(
                        invocation.arguments, invocation.context, validated=validated
                    )
            if isinstance(value, ToolResult) and value.outcome == "deferred":
                return value  # the tool defers the call (`ToolResult.defer`)
            if isinstance(value, _ITERATORS):
                raise _iterator_result(tool, value)
            content = tool.convert_result(value)
        except ResumeConflict:
            raise  # a losing resume stops as a whole, a sub-chain's too
        except TimeoutError as exc:
            if timeout is None:
                return self._on_error(exc, invocation)
            return ToolResult(
                content=f"Error: {tool.name!r} timed out after {timeout:g} s.",
                outcome="timeout",
                error=exc,
            )
        except Exception as exc:
            return self._on_error(exc, invocation)
        return ToolResult(content=content, return_direct=tool.return_direct, value=value)

    def _decided(self, invocation: ToolInvocation) -> ToolResult | ToolInvocation:
        """The result a resumed call's decision gives without running the tool, or the
        invocation to run."""
        decision = invocation.decision
        if isinstance(decision, Reject):
            return rejected(decision.reason)
        if isinstance(decision, Result):
            tool = invocation.tool
            try:
                content = tool.convert_result(decision.value)
            except Exception as exc:
                return self._on_error(exc, invocation)
            return ToolResult(
                content=content, return_direct=tool.return_direct, value=decision.value
            )
        if isinstance(decision, Approve) and decision.arguments is not None:
            if dict(decision.arguments) != dict(invocation.arguments):
                return invocation.with_arguments(decision.arguments)
        return invocation

    async def settle(
        self,
        request: ChatRequest,
        waiting: Waiting,
        decisions: Mapping[str, Any],
        *,
        hooks: tuple[ToolHook, ...] = (),
    ) -> ToolRound:
        """Settle the calls of a transcript's waiting round that `decisions` decide (checked
        before, `check_decisions`), in call order, through `hooks` down to `invoke`: each
        invocation carries its `decision` and `deferred` call; its tool context its
        decision and the state it deferred with. `round_calls` are the round's runnable
        calls, as when it first ran. Returns the settled calls' results."""
        message = waiting.message
        calls = tuple(c for c in message.tool_calls if c.id in decisions)
        resolved: dict[str, tuple[Tool, ValidatedArguments, Any]] = {}
        slots: list[ToolResult | None] = [None] * len(calls)
        for call in message.tool_calls:
            checked = self._resolve(request, call)
            if not isinstance(checked, ToolResult):
                resolved[call.id] = checked
            elif call.id in decisions:
                slots[calls.index(call)] = checked
        round_calls = tuple(c for c in message.tool_calls if c.id in resolved)
        pending: list[tuple[int, ToolInvocation]] = []
        for i, call in enumerate(calls):
            if slots[i] is not None:
                continue
            tool, arguments, validated = resolved[call.id]
            invocation = self._invocation(request, call, tool, arguments, validated, round_calls)
            decision = decisions[call.id]
            record = waiting.records[call.id]
            context = invocation.context
            invocation = replace(
                invocation,
                decision=decision,
                deferred=waiting.deferred_call(call),
                context=ToolContext(
                    request.tool_context,
                    call_id=context.call_id,
                    tool_name=context.tool_name,
                    conversation_id=context.conversation_id,
                    decision=decision,
                    state=record.get("state"),
                ),
            )
            pending.append((i, invocation))
        durations = [0.0] * len(calls)
        if pending:
            await self._run_all(self.pipeline(hooks), pending, slots, durations)
        return _round(calls, slots, durations)

    def _on_error(self, exc: Exception, invocation: ToolInvocation) -> ToolResult:
        if self.on_tool_error == "raise":
            raise ToolExecutionError(
                f"tool {invocation.name!r} failed: {describe_exception(exc)}",
                tool_name=invocation.name,
                call_id=invocation.call.id,
            ) from exc
        if callable(self.on_tool_error):
            content = self.on_tool_error(exc, invocation)
        else:
            content = f"Error: {describe_exception(exc)}"
        return ToolResult(content=content, outcome="error", error=exc)


_INVOKE = ToolCallingManager.invoke

_ITERATORS = (Iterator, AsyncIterator)


def _iterator_result(tool: Tool, value: object) -> TypeError:
    # Converting would drain it, outside the tool's timeout; it may never end.
    return TypeError(
        f"tool {tool.name!r} returned {type(value).__name__}, an iterator, which is not "
        "drained (it may never end): return a list"
    )


_NOT_STARTED = object()
_T = TypeVar("_T")


@types.coroutine
def _drive(
    coro: Coroutine[Any, Any, _T], context: Context | None, suspended: Any = _NOT_STARTED
) -> Generator[Any, Any, _T]:
    """Run `coro` to its end, each step in `context` (or the caller's), and return its
    result; pass `suspended` when it was started elsewhere and is suspended there: what
    `await coro` would do."""
    step: Callable[..., Any] = context.run if context is not None else _call
    try:
        if suspended is _NOT_STARTED:
            suspended = step(coro.send, None)
        while True:
            try:
                value = yield suspended
            except GeneratorExit:
                coro.close()
                raise
            except BaseException as exc:
                suspended = step(coro.throw, exc)
            else:
                suspended = step(coro.send, value)
    except StopIteration as stop:
        result: _T = stop.value
        return result


async def _awaited(awaitable: Awaitable[_T]) -> _T:
    return await awaitable


async def _run_in(coro: Coroutine[Any, Any, None], context: Context) -> None:
    """A task that runs `coro` in `context`."""
    await _drive(coro, context)


def _call(function: Callable[..., Any], *args: Any) -> Any:
    return function(*args)


def _wrap(hook: ToolHook, next_step: ToolNext) -> ToolNext:
    async def step(invocation: ToolInvocation) -> ToolResult:
        arguments = invocation.arguments
        if (
            type(arguments) is not ValidatedArguments
            or arguments.tool is not invocation.tool
            or arguments.validated is not invocation.validated
        ):
            checked = _checked(invocation)
            if isinstance(checked, ToolResult):
                return checked
            invocation = checked
        return await hook(invocation, next_step)

    return step


def _checked(invocation: ToolInvocation) -> ToolInvocation | ToolResult:
    """`invocation` with its arguments validated (they were put in by other means than
    `with_arguments`), or the `invalid` result of arguments that do not fit: what a hook or
    the tool may see. (The callers first check whether they are validated already.)"""
    try:
        return invocation.checked()
    except InvalidToolArguments as exc:
        return ToolResult(
            content=f"Error: invalid arguments for {invocation.name!r}: {exc}",
            outcome="invalid",
            error=exc,
        )


def _segments(
    pending: list[tuple[int, ToolInvocation]],
) -> list[list[tuple[int, ToolInvocation]]]:
    """A round split at its sequential calls, in call order: each sequential call alone,
    the calls between them together (run one segment after the other)."""
    segments: list[list[tuple[int, ToolInvocation]]] = []
    together: list[tuple[int, ToolInvocation]] = []
    for item in pending:
        if item[1].tool.sequential:
            if together:
                segments.append(together)
                together = []
            segments.append([item])
        else:
            together.append(item)
    if together:
        segments.append(together)
    return segments


def _listened(context: Context) -> tuple[CallFinished | None, Context]:
    """This round's call-end listener, and `context` without it for the call to run in
    (a call's own tool rounds, a sub-chain's, must not report to this round's stream)."""
    listener = call_finished.get()
    if listener is not None:
        context.run(call_finished.set, None)
    return listener, context


def _run_inline(
    run: Callable[[ToolInvocation], Coroutine[Any, Any, ToolResult]],
    pending: list[tuple[int, ToolInvocation]],
    slots: list[ToolResult | None],
    durations: list[float],
) -> None:
    """A round whose calls cannot suspend (`ToolCallingManager._never_suspend`), as
    `_run_all` runs it when no call suspends, without the task group it would open and
    never use: each call in order, each in a copy of the context taken before the first
    starts, to its end in one step. A call that raises (a `BaseException` such as
    `SystemExit`) leaves the later ones unstarted and is raised as itself."""
    contexts = [copy_context() for _ in pending]
    for position, (i, invocation) in enumerate(pending):
        start = time.perf_counter()
        coro = run(invocation)
        try:
            contexts[position].run(coro.send, None)
        except StopIteration as stop:
            slots[i] = stop.value
        except BaseException:
            durations[i] = time.perf_counter() - start
            raise
        else:  # pragma: no cover - the code was read: it has no instruction to suspend at
            coro.close()
            raise RuntimeError(f"tool {invocation.name!r} suspended, which it cannot")
        durations[i] = time.perf_counter() - start


def rejected(reason: str) -> ToolResult:
    """The result the model reads for a call a decision rejected."""
    return ToolResult(
        content=f"Error: not executed, the call was rejected: {reason}", outcome="rejected"
    )


def _round(
    calls: tuple[ToolCall, ...], slots: list[ToolResult | None], durations: list[float]
) -> ToolRound:
    """The round of `calls` whose results are in `slots` (a call left without one was
    cancelled with the round)."""
    done = tuple([r if r is not None else _cancelled() for r in slots])
    return ToolRound(
        calls=calls,
        results=done,
        messages=tuple([r.to_message(c) for r, c in zip(done, calls, strict=True)]),
        durations=tuple(durations),
    )


def _cancelled() -> ToolResult:
    return ToolResult(content="Error: not executed, the round was cancelled.", outcome="cancelled")


__all__ = ["EFFECTS", "ToolCallingManager", "ToolErrorHandler", "ToolRound", "rejected"]

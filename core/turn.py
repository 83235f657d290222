"""`TurnAdvisor`: a link around the whole turn written once, for `call` and `stream` alike."""

from __future__ import annotations

import time
import types
from collections.abc import AsyncIterator, Awaitable, Callable, Generator
from contextvars import Context, copy_context
from typing import Any, TypeAlias

from .advisor import Advisor, CallNext, StreamNext
from .errors import StreamInterruptedError, TurnReplayError
from .events import AnswerDiscarded, ResponseCompleted, StreamEvent
from .request import ChatRequest
from .response import ChatResponse
from .streams import closing_stream

__all__ = ["Proceed", "StreamProceed", "TurnAdvisor"]

Proceed: TypeAlias = Callable[[ChatRequest], Awaitable[ChatResponse]]
"""What `TurnAdvisor.around` receives: runs the rest of the chain, returns its response."""


class TurnAdvisor(Advisor):
    """A link that wraps the rest of the turn in one function, `around`, on both paths.

    Override `around(request, proceed)`: do what comes before, `response = await
    proceed(request)` (the rest of the chain; on the stream path its deltas reach the
    caller as they come), do what comes after, and return the final response. Do not
    override `call` or `stream`: this class derives both from `around`. A turn for which
    `applies(request)` is false skips the link altogether (no `around`, nothing paid).

    Control flow, the same on both paths:

    - `Chain.call`: `around(request, next)`; `proceed` is the rest of the chain itself.
    - `Chain.stream`: `around` runs inside the stream. Each event of the rest of the chain
      but its `ResponseCompleted` is passed to the caller while `proceed` is pending;
      `proceed` then returns the completed response, and what `around` returns is sent as
      the stream's one `ResponseCompleted` (so `around` may replace it). Streamed deltas
      cannot be taken back: a second `proceed` after any event was streamed raises
      `TurnReplayError` (a retry is fine while nothing was streamed, for example after
      the rest of the chain failed at once), unless `around` first told the caller to
      drop them: `await self.discard(proceed, AnswerDiscarded(...))` sends that event
      (on the call path it does nothing) and allows the next `proceed`. A stream of the
      rest that ends without `ResponseCompleted` makes `proceed` raise
      `StreamInterruptedError`.
    - Errors: an exception of the rest of the chain comes out of `proceed` on both paths
      (on the stream path after the events streamed before it); what `around` raises or
      lets through is what the caller gets. A caller that closes the stream early raises
      `GeneratorExit` out of `proceed` (after the rest of the chain is closed), so
      `finally` blocks and `async with` exits in `around` run as on any other exit.
    - Short-circuit: return a response without calling `proceed` (the stream is then the
      `ResponseCompleted` alone).

    `around` does not see the deltas themselves; to tell the paths apart (an observer
    recording time to first chunk), the stream path's `proceed` is a `StreamProceed`.

    Context variables `around` sets stay set on the stream path while the caller holds an
    event, as in a hand-written `stream`, unless `scoped(request)` says otherwise for the
    turn: then, on the stream path, `around` and every step of the rest of the chain run in a
    context of the turn's own (copied from the caller's when the stream starts, as a task
    does), so what `around` sets (a current span) is seen by the rest of the chain and
    never by the caller between events. On the call path the caller resumes only once
    `around` returned, so a variable it resets in a `finally` never reaches the caller
    either. Call `proceed` from `around` itself, not from a task it starts.
    """

    def applies(self, request: ChatRequest) -> bool:
        """Whether `around` has anything to do in this turn (default `True`); asked once
        as the turn starts. When it says `False`, the rest of the chain runs as if this
        link were not there, on both paths: no `around`, no stream driver, nothing paid
        (a tracer with nothing to record, a link configured off)."""
        return True

    def scoped(self, request: ChatRequest) -> bool:
        """Whether this turn's stream runs `around` and the rest of the chain in a context
        of the turn's own (see the class docstring); asked once as the stream starts.
        The default, `False`, costs nothing; override it to return `True` for the turns
        whose `around` sets a context variable the caller must not see (scoping costs a
        `Context.run` per step of the stream)."""
        return False

    async def around(self, request: ChatRequest, proceed: Proceed) -> ChatResponse:
        """Wrap the rest of the turn; see the class docstring. The default passes through."""
        return await proceed(request)

    async def discard(self, proceed: Proceed, event: AnswerDiscarded) -> None:
        """Take back what the rest of the chain streamed, to call `proceed` again.

        On the stream path `event` goes to the caller at once (a UI drops the answer it
        showed since the turn started or since the last such event) and the next
        `proceed` is allowed though events were streamed before it. On the call path
        nothing was streamed and nothing happens.
        """
        if isinstance(proceed, StreamProceed):
            await _announce(proceed, event)

    async def call(self, request: ChatRequest, next: CallNext) -> ChatResponse:
        if not self.applies(request):
            return await next(request)
        return await self.around(request, next)

    def stream(self, request: ChatRequest, next: StreamNext) -> AsyncIterator[StreamEvent]:
        if not self.applies(request):
            return next(request)
        return self._drive(request, next)

    async def _drive(self, request: ChatRequest, next: StreamNext) -> AsyncIterator[StreamEvent]:
        proceed = StreamProceed()
        context = copy_context() if self.scoped(request) else None
        turn = self.around(request, proceed)
        sent: Any = None
        thrown: BaseException | None = None
        closing = False
        last: ChatResponse | None = None  # the rest's last response, and its event
        last_event: ResponseCompleted | None = None
        try:
            while True:
                # Drive `around` by hand: what it awaits goes on to the event loop; when
                # it awaits `proceed`, the rest of the chain streams from here.
                try:
                    if context is not None:
                        if thrown is None:
                            yielded = context.run(turn.send, sent)
                        else:
                            yielded, thrown = context.run(turn.throw, thrown), None
                    elif thrown is None:
                        yielded = turn.send(sent)
                    else:
                        yielded, thrown = turn.throw(thrown), None
                except StopIteration as stop:
                    response: ChatResponse = stop.value
                    break
                sent = None
                if yielded is not proceed:
                    if type(yielded) is _Announce and yielded.proceed is proceed:
                        proceed._streamed = False
                        yield yielded.event
                        continue
                    try:
                        sent = await _forward(yielded)
                    except BaseException as exc:
                        thrown = exc
                    continue
                if closing:
                    thrown = GeneratorExit()
                    continue
                if proceed._streamed:
                    thrown = TurnReplayError(
                        "proceed was called again after events of the stream were passed "
                        "on; a TurnAdvisor may retry on the stream path only before anything "
                        "streamed, or after discard() told the caller to drop them"
                    )
                    continue
                completed: ChatResponse | None = None
                completed_event: ResponseCompleted | None = None
                streamed = False
                try:
                    if context is None:
                        rest = next(proceed._request)
                    else:
                        rest = _InContext(context, context.run(next, proceed._request))
                    async with closing_stream(rest) as events:
                        async for event in events:
                            if isinstance(event, ResponseCompleted):
                                completed, completed_event = event.response, event
                                if not streamed:
                                    proceed.first_event_at = time.perf_counter()
                                continue
                            if not streamed:
                                streamed = proceed._streamed = True
                                proceed.first_event_at = time.perf_counter()
                            yield event
                    if completed is None:
                        raise StreamInterruptedError(
                            "the stream ended without a ResponseCompleted event"
                        )
                except GeneratorExit as exc:
                    closing, thrown = True, exc
                except BaseException as exc:
                    thrown = exc
                else:
                    sent = last = completed
                    last_event = completed_event
        finally:
            if context is None:
                turn.close()
            else:
                context.run(turn.close)
        if not closing:
            if response is not last or last_event is None:  # around replaced it
                last_event = ResponseCompleted(response)
            yield last_event


class StreamProceed:
    """`proceed` on the stream path (on the call path it is the rest of the chain itself).

    `around` may test `isinstance(proceed, StreamProceed)` to know the turn is streamed,
    and read `first_event_at`: the `time.perf_counter()` of the first event of the rest
    of the chain (its `ResponseCompleted` if it streamed nothing else), `None` before it;
    `streamed` says whether events of the rest reached the caller since the turn started
    or since the last `TurnAdvisor.discard` (a `proceed` now would raise `TurnReplayError`).
    """

    __slots__ = ("_request", "_streamed", "first_event_at")

    _request: ChatRequest  # set by each call, read by `TurnAdvisor.stream`

    def __init__(self) -> None:
        self._streamed = False
        self.first_event_at: float | None = None

    @property
    def streamed(self) -> bool:
        """Whether events were passed on since the start or the last discard."""
        return self._streamed

    def __call__(self, request: ChatRequest) -> Awaitable[ChatResponse]:
        return _proceed(self, request)


@types.coroutine
def _proceed(proceed: StreamProceed, request: ChatRequest) -> Generator[Any, Any, ChatResponse]:
    """Suspend `around` up to `TurnAdvisor.stream`, which streams the rest of the chain
    with `request` and sends back its response (or throws its exception in)."""
    proceed._request = request
    response: ChatResponse = yield proceed
    return response


@types.coroutine
def _forward(value: Any) -> Generator[Any, Any, Any]:
    """Pass what `around` awaits (a future, a trap) to the event loop; return its answer."""
    return (yield value)


class _Announce:
    """What `TurnAdvisor.discard` hands up to the stream driver: an event to send now."""

    __slots__ = ("event", "proceed")

    def __init__(self, proceed: StreamProceed, event: StreamEvent) -> None:
        self.proceed = proceed
        self.event = event


@types.coroutine
def _announce(proceed: StreamProceed, event: StreamEvent) -> Generator[Any, Any, None]:
    yield _Announce(proceed, event)


class _InContext:
    """An event stream every step of which (`__anext__`, `aclose`) runs in `context`."""

    __slots__ = ("_context", "_events")

    def __init__(self, context: Context, events: AsyncIterator[StreamEvent]) -> None:
        self._context = context
        self._events = events

    def __aiter__(self) -> _InContext:
        return self

    def __anext__(self) -> Awaitable[StreamEvent]:
        return _run_in(self._context, self._events.__anext__())

    async def aclose(self) -> None:
        aclose = getattr(self._events, "aclose", None)
        if aclose is not None:
            await _run_in(self._context, aclose())


@types.coroutine
def _run_in(context: Context, step: Awaitable[Any]) -> Generator[Any, Any, Any]:
    """Await `step` with each of its steps run in `context` (as a task runs its own)."""
    coro = step.__await__()
    sent: Any = None
    thrown: BaseException | None = None
    while True:
        try:
            if thrown is None:
                yielded = context.run(coro.send, sent)
            else:
                yielded, thrown = context.run(coro.throw, thrown), None
        except StopIteration as stop:
            return stop.value
        try:
            sent = yield yielded
        except GeneratorExit:
            context.run(coro.close)
            raise
        except BaseException as exc:
            sent, thrown = None, exc

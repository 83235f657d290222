"""`TurnAdvisor`: a link around the whole turn written once, for `call` and `stream` alike."""

from __future__ import annotations

import time
import types
from collections.abc import AsyncIterator, Awaitable, Callable, Generator
from typing import Any, TypeAlias

from .advisor import Advisor, CallNext, StreamNext
from .errors import StreamInterruptedError, TurnReplayError
from .events import ResponseCompleted, StreamEvent
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
    override `call` or `stream`: this class derives both from `around`.

    Control flow, the same on both paths:

    - `Chain.call`: `around(request, next)`; `proceed` is the rest of the chain itself.
    - `Chain.stream`: `around` runs inside the stream. Each event of the rest of the chain
      but its `ResponseCompleted` is passed to the caller while `proceed` is pending;
      `proceed` then returns the completed response, and what `around` returns is sent as
      the stream's one `ResponseCompleted` (so `around` may replace it). Streamed deltas
      cannot be taken back: a second `proceed` after any event was streamed raises
      `TurnReplayError` (a retry is fine while nothing was streamed, for example after
      the rest of the chain failed at once). A stream of the rest that ends without
      `ResponseCompleted` makes `proceed` raise `StreamInterruptedError`.
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
    event, as in a hand-written `stream`. Call `proceed` from `around` itself, not from a
    task it starts.
    """

    async def around(self, request: ChatRequest, proceed: Proceed) -> ChatResponse:
        """Wrap the rest of the turn; see the class docstring. The default passes through."""
        return await proceed(request)

    async def call(self, request: ChatRequest, next: CallNext) -> ChatResponse:
        return await self.around(request, next)

    async def stream(self, request: ChatRequest, next: StreamNext) -> AsyncIterator[StreamEvent]:
        proceed = StreamProceed()
        turn = self.around(request, proceed)
        sent: Any = None
        thrown: BaseException | None = None
        closing = False
        try:
            while True:
                # Drive `around` by hand: what it awaits goes on to the event loop; when
                # it awaits `proceed`, the rest of the chain streams from here.
                try:
                    if thrown is None:
                        yielded = turn.send(sent)
                    else:
                        yielded, thrown = turn.throw(thrown), None
                except StopIteration as stop:
                    response: ChatResponse = stop.value
                    break
                sent = None
                if yielded is not proceed:
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
                        "streamed"
                    )
                    continue
                completed: ChatResponse | None = None
                streamed = False
                try:
                    async with closing_stream(next(proceed._request)) as events:
                        async for event in events:
                            if isinstance(event, ResponseCompleted):
                                completed = event.response
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
                    sent = completed
        finally:
            turn.close()
        if not closing:
            yield ResponseCompleted(response)


class StreamProceed:
    """`proceed` on the stream path (on the call path it is the rest of the chain itself).

    `around` may test `isinstance(proceed, StreamProceed)` to know the turn is streamed,
    and read `first_event_at`: the `time.perf_counter()` of the first event of the rest
    of the chain (its `ResponseCompleted` if it streamed nothing else), `None` before it.
    """

    __slots__ = ("_request", "_streamed", "first_event_at")

    _request: ChatRequest  # set by each call, read by `TurnAdvisor.stream`

    def __init__(self) -> None:
        self._streamed = False
        self.first_event_at: float | None = None

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

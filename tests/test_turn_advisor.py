"""`TurnAdvisor`: one `around` function gives a link its `call` and its `stream`."""

from __future__ import annotations

import contextvars
import time
from collections.abc import AsyncIterator
from typing import Literal

import anyio
import anyio.lowlevel
import pytest

from advisorchain import (
    Advisor,
    AnswerDiscarded,
    AssistantMessage,
    CallNext,
    Chain,
    ChatRequest,
    ChatResponse,
    ResponseCompleted,
    StreamEvent,
    StreamInterruptedError,
    StreamNext,
    TextDelta,
)
from advisorchain.advisors import Proceed, StreamProceed, TurnAdvisor, TurnReplayError
from advisorchain.core.streams import closing_stream
from advisorchain.providers import ScriptedChatModel

Path = Literal["call", "stream"]
PATHS = pytest.mark.parametrize("path", ["call", "stream"])
pytestmark = pytest.mark.anyio

_seen: contextvars.ContextVar[str] = contextvars.ContextVar("_seen", default="unset")


class Recorder(TurnAdvisor):
    """Records what `around` sees; waits on the event loop before and after the turn."""

    def __init__(self) -> None:
        self.log: list[str] = []
        self.lock = anyio.Lock()

    async def around(self, request: ChatRequest, proceed: Proceed) -> ChatResponse:
        self.log.append(f"before {request.messages[-1].text}")
        token = _seen.set("set by around")
        try:
            async with self.lock:
                await anyio.lowlevel.checkpoint()
                response = await proceed(request)
                await anyio.lowlevel.checkpoint()
        except BaseException as exc:
            self.log.append(f"raised {type(exc).__name__}")
            raise
        finally:
            self.log.append("finally")
            _seen.reset(token)
        self.log.append(f"after {response.text}")
        return response


class Explodes(Advisor):
    """Streams two deltas, then fails; `call` fails at once."""

    def __init__(self) -> None:
        self.closed = False

    async def call(self, request: ChatRequest, next: CallNext) -> ChatResponse:
        raise ValueError("boom")

    async def stream(self, request: ChatRequest, next: StreamNext) -> AsyncIterator[StreamEvent]:
        try:
            yield TextDelta("par")
            yield TextDelta("tial")
            raise ValueError("boom")
        finally:
            self.closed = True


class Watches(Advisor):
    """Records the context variable and whether its stream was closed."""

    def __init__(self) -> None:
        self.seen: list[str] = []
        self.closed = False

    async def call(self, request: ChatRequest, next: CallNext) -> ChatResponse:
        self.seen.append(_seen.get())
        return await next(request)

    async def stream(self, request: ChatRequest, next: StreamNext) -> AsyncIterator[StreamEvent]:
        self.seen.append(_seen.get())
        try:
            async with closing_stream(next(request)) as events:
                async for event in events:
                    yield event
        finally:
            self.closed = True


async def run(chain: Chain, path: Path, text: str = "Hi") -> tuple[ChatResponse, list[str]]:
    """The response and, when streamed, the text of the deltas."""
    if path == "call":
        return await chain.call(text), []
    events = [event async for event in chain.stream(text)]
    assert sum(isinstance(e, ResponseCompleted) for e in events) == 1
    last = events[-1]
    assert isinstance(last, ResponseCompleted)
    return last.response, [e.text for e in events if isinstance(e, TextDelta)]


@PATHS
async def test_around_wraps_the_turn_on_both_paths(path: Path) -> None:
    recorder, watches = Recorder(), Watches()
    chain = Chain([recorder, watches], model=ScriptedChatModel(["Hello there."], chunk_size=3))
    response, deltas = await run(chain, path)
    assert response.text == "Hello there."
    assert recorder.log == ["before Hi", "finally", "after Hello there."]
    assert watches.seen == ["set by around"]
    assert _seen.get() == "unset"
    if path == "stream":
        assert deltas == ["Hel", "lo ", "the", "re."]


class Replaces(TurnAdvisor):
    async def around(self, request: ChatRequest, proceed: Proceed) -> ChatResponse:
        response = await proceed(request)
        return response.with_message(AssistantMessage(content=response.text.upper()))


@PATHS
async def test_around_may_replace_the_final_response(path: Path) -> None:
    chain = Chain([Replaces()], model=ScriptedChatModel(["quiet"], chunk_size=2))
    response, deltas = await run(chain, path)
    assert response.text == "QUIET"
    if path == "stream":
        assert deltas == ["qu", "ie", "t"]  # streamed deltas pass unchanged


@PATHS
async def test_an_error_after_some_deltas_propagates_through_around(path: Path) -> None:
    recorder, explodes = Recorder(), Explodes()
    chain = Chain([recorder, explodes], model=ScriptedChatModel(["never"]))
    deltas: list[str] = []
    with pytest.raises(ValueError, match="boom"):
        if path == "call":
            await chain.call("Hi")
        else:
            async for event in chain.stream("Hi"):
                assert isinstance(event, TextDelta)
                deltas.append(event.text)
    assert recorder.log == ["before Hi", "raised ValueError", "finally"]
    if path == "stream":
        assert deltas == ["par", "tial"]
        assert explodes.closed


async def test_closing_the_stream_early_closes_the_rest_and_runs_finally() -> None:
    recorder, watches = Recorder(), Watches()
    chain = Chain([recorder, watches], model=ScriptedChatModel(["Hello there."], chunk_size=2))
    async with closing_stream(chain.stream("Hi")) as events:
        async for event in events:
            assert event == TextDelta("He")
            break
    assert recorder.log == ["before Hi", "raised GeneratorExit", "finally"]
    assert watches.closed
    assert _seen.get() == "unset"


class Retries(TurnAdvisor):
    """Tries the rest of the turn again once when it fails."""

    async def around(self, request: ChatRequest, proceed: Proceed) -> ChatResponse:
        try:
            return await proceed(request)
        except ConnectionError:
            return await proceed(request)


@PATHS
async def test_a_retry_before_anything_streamed_works_on_both_paths(path: Path) -> None:
    model = ScriptedChatModel([ConnectionError("flaky"), "second try"])
    response, _ = await run(Chain([Retries()], model=model), path)
    assert response.text == "second try"
    assert len(model.requests) == 2


@PATHS
async def test_a_retry_after_events_streamed_is_refused_on_the_stream_path(path: Path) -> None:
    class Twice(TurnAdvisor):
        async def around(self, request: ChatRequest, proceed: Proceed) -> ChatResponse:
            await proceed(request)
            return await proceed(request)

    model = ScriptedChatModel(["one", "two"])
    chain = Chain([Twice()], model=model)
    if path == "call":
        assert (await chain.call("Hi")).text == "two"
        return
    deltas: list[str] = []
    with pytest.raises(TurnReplayError, match="again after events"):
        async for event in chain.stream("Hi"):
            assert isinstance(event, TextDelta)
            deltas.append(event.text)
    assert deltas == ["one"]
    assert len(model.requests) == 1


@PATHS
async def test_a_short_circuit_answers_without_the_rest(path: Path) -> None:
    class Canned(TurnAdvisor):
        async def around(self, request: ChatRequest, proceed: Proceed) -> ChatResponse:
            await anyio.lowlevel.checkpoint()
            return ChatResponse(message=AssistantMessage(content="canned"))

    model = ScriptedChatModel(["unused"])
    response, deltas = await run(Chain([Canned()], model=model), path)
    assert (response.text, deltas, model.requests) == ("canned", [], [])


async def test_a_stream_without_its_final_event_raises_out_of_proceed() -> None:
    class Truncates(Advisor):
        async def call(self, request: ChatRequest, next: CallNext) -> ChatResponse:
            return await next(request)

        async def stream(
            self, request: ChatRequest, next: StreamNext
        ) -> AsyncIterator[StreamEvent]:
            yield TextDelta("cut")

    recorder = Recorder()
    chain = Chain([recorder, Truncates()], model=ScriptedChatModel(["x"]))
    with pytest.raises(StreamInterruptedError, match="without a ResponseCompleted"):
        async for _ in chain.stream("Hi"):
            pass
    assert recorder.log == ["before Hi", "raised StreamInterruptedError", "finally"]


@PATHS
async def test_cancellation_while_around_waits_reaches_around(path: Path) -> None:
    class Waits(TurnAdvisor):
        def __init__(self) -> None:
            self.log: list[str] = []

        async def around(self, request: ChatRequest, proceed: Proceed) -> ChatResponse:
            try:
                await anyio.sleep_forever()
            finally:
                self.log.append("finally")
            raise AssertionError("not reached")

    waits = Waits()
    chain = Chain([waits], model=ScriptedChatModel(["x"]))
    with anyio.move_on_after(0.01) as scope:
        await run(chain, path)
    assert scope.cancelled_caught
    assert waits.log == ["finally"]


@PATHS
async def test_the_stream_path_says_so_and_when_the_first_event_came(path: Path) -> None:
    class Times(TurnAdvisor):
        def __init__(self) -> None:
            self.seen: list[tuple[bool, bool, bool]] = []

        async def around(self, request: ChatRequest, proceed: Proceed) -> ChatResponse:
            start = time.perf_counter()
            streamed = isinstance(proceed, StreamProceed)
            before = streamed and proceed.first_event_at is None  # type: ignore[attr-defined]
            response = await proceed(request)
            first = proceed.first_event_at if isinstance(proceed, StreamProceed) else None
            self.seen.append((streamed, before, first is not None and first >= start))
            return response

    times = Times()
    await run(Chain([times], model=ScriptedChatModel(["Hello."])), path)
    assert times.seen == ([(True, True, True)] if path == "stream" else [(False, False, False)])


async def test_an_around_that_swallows_the_close_cannot_stream_on() -> None:
    class Stubborn(TurnAdvisor):
        def __init__(self) -> None:
            self.log: list[str] = []

        async def around(self, request: ChatRequest, proceed: Proceed) -> ChatResponse:
            try:
                return await proceed(request)
            except GeneratorExit:
                self.log.append("closed")
            try:
                return await proceed(request)  # refused: the caller is gone
            except GeneratorExit:
                self.log.append("closed again")
            await anyio.lowlevel.checkpoint()
            return ChatResponse(message=AssistantMessage(content="too late"))

    stubborn = Stubborn()
    model = ScriptedChatModel(["Hello there.", "unused"], chunk_size=2)
    async with closing_stream(Chain([stubborn], model=model).stream("Hi")) as events:
        async for event in events:
            assert event == TextDelta("He")
            break
    assert stubborn.log == ["closed", "closed again"]
    assert len(model.requests) == 1


class Discards(TurnAdvisor):
    """Rejects the first answer, tells the caller, and asks again."""

    def __init__(self) -> None:
        self.streamed: list[bool] = []

    async def around(self, request: ChatRequest, proceed: Proceed) -> ChatResponse:
        first = await proceed(request)
        if isinstance(proceed, StreamProceed):
            self.streamed.append(proceed.streamed)
        await self.discard(proceed, AnswerDiscarded(reason=f"not {first.text!r}", attempt=1))
        if isinstance(proceed, StreamProceed):
            self.streamed.append(proceed.streamed)
        return await proceed(request)


@PATHS
async def test_discard_lets_around_ask_again_after_events_streamed(path: Path) -> None:
    model = ScriptedChatModel(["one", "two"])
    discards = Discards()
    chain = Chain([discards], model=model)
    if path == "call":
        assert (await chain.call("Hi")).text == "two"
        assert discards.streamed == []
        return
    events = [event async for event in chain.stream("Hi")]
    assert [type(e).__name__ for e in events] == [
        "TextDelta",
        "AnswerDiscarded",
        "TextDelta",
        "ResponseCompleted",
    ]
    assert events[1] == AnswerDiscarded(reason="not 'one'", attempt=1)
    assert isinstance(events[-1], ResponseCompleted) and events[-1].response.text == "two"
    assert discards.streamed == [True, False]
    assert len(model.requests) == 2


async def test_closing_the_stream_at_the_discarded_event_closes_around() -> None:
    log: list[str] = []

    class Logs(Discards):
        async def around(self, request: ChatRequest, proceed: Proceed) -> ChatResponse:
            try:
                return await super().around(request, proceed)
            except GeneratorExit:
                log.append("closed")
                raise

    model = ScriptedChatModel(["one", "two"])
    async with closing_stream(Chain([Logs()], model=model).stream("Hi")) as events:
        async for event in events:
            if isinstance(event, AnswerDiscarded):
                break
    assert log == ["closed"]
    assert len(model.requests) == 1


class Scoped(Recorder):
    def scoped(self, request: ChatRequest) -> bool:
        return True


class Peeks(Advisor):
    """Records the context variable at each step of its stream (and its call)."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    async def call(self, request: ChatRequest, next: CallNext) -> ChatResponse:
        self.seen.append(_seen.get())
        return await next(request)

    async def stream(self, request: ChatRequest, next: StreamNext) -> AsyncIterator[StreamEvent]:
        async with closing_stream(next(request)) as events:
            async for event in events:
                self.seen.append(_seen.get())
                yield event
                self.seen.append(_seen.get())


@PATHS
@pytest.mark.parametrize("scoped", [False, True])
async def test_a_scoped_context_is_the_rest_of_the_chains_never_the_callers(
    path: Path, scoped: bool
) -> None:
    peeks = Peeks()
    link = Scoped() if scoped else Recorder()
    chain = Chain([link, peeks], model=ScriptedChatModel(["Hello there."], chunk_size=3))
    if path == "call":
        await chain.call("Hi")
        assert peeks.seen == ["set by around"]
        assert _seen.get() == "unset"
        return
    between: list[str] = []
    async with closing_stream(chain.stream("Hi")) as events:
        async for _ in events:
            between.append(_seen.get())
    assert set(peeks.seen) == {"set by around"}  # every step of the rest of the chain
    # the caller holds each event: unscoped, around's variable is still set there
    assert set(between[:-1]) == ({"unset"} if scoped else {"set by around"})
    assert between[-1] == "unset"  # around has returned before the final event
    assert _seen.get() == "unset"


async def test_a_scoped_turn_closed_early_runs_around_s_finally_in_its_context() -> None:
    scoped = Scoped()
    chain = Chain([scoped], model=ScriptedChatModel(["Hello there."], chunk_size=3))
    async with closing_stream(chain.stream("Hi")) as events:
        async for _ in events:
            break
    # `_seen.reset(token)` in around's finally would raise in another context
    assert scoped.log == ["before Hi", "raised GeneratorExit", "finally"]
    assert _seen.get() == "unset"


@PATHS
@pytest.mark.parametrize("applies", [False, True])
async def test_a_turn_the_link_does_not_apply_to_skips_around(path: Path, applies: bool) -> None:
    class Sometimes(Replaces):
        def applies(self, request: ChatRequest) -> bool:
            return applies

    response, deltas = await run(Chain([Sometimes()], model=ScriptedChatModel(["Hi."])), path)
    assert response.text == ("HI." if applies else "Hi.")
    if path == "stream":
        assert deltas == ["Hi."]

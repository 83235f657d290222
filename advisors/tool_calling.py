"""`ToolCallingAdvisor`: the tool loop, as one link of the chain."""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import replace
from functools import partial
from typing import Any, Literal

from ..core.advisor import Advisor, CallNext, ChainView, Placement, StreamNext
from ..core.deferred import DeferredCall, Waiting, check_decisions, record, with_records
from ..core.errors import StreamInterruptedError, ToolCallLimitExceeded
from ..core.events import (
    ResponseCompleted,
    StreamEvent,
    ToolCallFinished,
    ToolCallStarted,
)
from ..core.invocation import ToolHook, ToolInvocation, ToolResult
from ..core.manager import ToolCallingManager, ToolRound
from ..core.messages import AssistantMessage, Message, ToolCall, ToolMessage, UserMessage
from ..core.progress import reports_progress, with_progress
from ..core.request import ChatRequest
from ..core.response import ChatResponse
from ..core.streams import closing_stream
from ..core.usage import Usage
from ..core.watchers import watched_by


class ToolCallingAdvisor(Advisor):
    """Runs the tool loop: call the rest of the chain, execute the tools it asks for, repeat.

    Control flow: calls `next`; while the response asks for tools, executes them (one
    round, concurrently, results in call order) and calls `next` again with the
    assistant message and one tool message per call appended. It stops when the model
    answers without tool calls, when every call of a round is return-direct
    (`finish_reason="return_direct"`, the results are the answer), or at the call limits
    (bounded: by default 150 calls per turn), or when a call was answered `deferred`
    (`ToolResult.defer`: a deferred approval, external work, a question to the user, a
    sub-chain that deferred): then the turn ends with `finish_reason="deferred"`,
    `response.deferred` naming the waiting calls, and `messages` ending with the round's
    assistant message (recording the waiting calls) and the finished calls' results.

    A resume is a turn whose request carries `decisions`: before calling the model, the
    loop checks them against the transcript's waiting round (`check_decisions`, one
    `InvalidDecisions` before anything runs), settles the decided calls through the
    chain's `call_tool` hooks (each invocation carrying its decision) and goes on; the
    response (and stream, which reports the settled calls first) starts with their
    results. Calls left without a decision keep waiting: the turn ends deferred again.
    A call settled by a decision that defers once more is answered with an error (a
    resume settles what it decides). Decisions apply once per turn: a link that calls
    the loop again in the same turn (a structured-output retry) sends them on unused.
    Only the links after it are called again each round; the links before it see the
    whole turn once.

    The returned response carries the usage of every round, including every model call
    made inside its tool calls by a chain (a sub-agent's, also one that failed or was
    retried; as an enclosing `BudgetAdvisor` counts them), and, in `messages`, every
    message the turn added. Streaming passes the model's deltas through as they arrive
    (text, reasoning, and the `ToolCallDelta` fragments of the calls it writes, so a UI
    shows the arguments as they come), then emits `ToolCallStarted` for each call of the
    round, the `ToolProgress` of tools that report it (MCP tools, chains as tools), and
    each call's `ToolCallFinished` as it ends.

    A forcing `tool_choice` (`"required"` or a tool's name) applies to the first model
    call only: after a round in which tools ran (and on a resumed turn), the next calls
    get `tool_choice="auto"`, or the model, still forced, could never answer.
    `reset_tool_choice=False` keeps the caller's choice for every round.

    Options are those of `ToolCallingManager`, or pass a ready `manager`.
    """

    def __init__(
        self,
        manager: ToolCallingManager | None = None,
        *,
        max_calls_per_tool: int = 40,
        max_calls: int = 150,
        tool_limits: Mapping[str, int] | None = None,
        on_limit: Literal["raise", "report"] = "raise",
        on_tool_error: Literal["report", "raise"]
        | Callable[[BaseException, ToolInvocation], str] = "report",
        max_concurrency: int | None = None,
        tool_timeout: float | None = None,
        reset_tool_choice: bool = True,
    ) -> None:
        self.reset_tool_choice = reset_tool_choice
        self.manager = manager or ToolCallingManager(
            max_calls_per_tool=max_calls_per_tool,
            max_calls=max_calls,
            tool_limits=tool_limits,
            on_limit=on_limit,
            on_tool_error=on_tool_error,
            max_concurrency=max_concurrency,
            tool_timeout=tool_timeout,
        )

        self._chain: ChainView | None = None

    @property
    def tool_loop(self) -> ToolCallingManager:
        """This link runs the tool loop with `manager`: the links after it are inside it."""
        return self.manager

    def bind(self, placement: Placement) -> ToolCallingAdvisor:
        """The link for `placement.chain`: a copy that runs that chain's `tool_hooks`."""
        link = copy.copy(self)
        link._chain = placement.chain
        return link

    def _hooks(self) -> tuple[ToolHook, ...]:
        return self._chain.tool_hooks if self._chain is not None else ()

    async def call(self, request: ChatRequest, next: CallNext) -> ChatResponse:
        turn = _Turn(request, self.reset_tool_choice)
        hooks = self._hooks()
        if turn.waiting is not None:
            settled = await turn.settle(self.manager, hooks)
            done = turn.settled(settled)
            if done is not None:
                return done
        while True:
            response = await next(turn.request)
            done = turn.model_answered(response)
            if done is not None:
                return done
            tool_round = await turn.execute(self.manager, response, hooks)
            done = await turn.round_finished(response, tool_round)
            if done is not None:
                return done

    async def stream(self, request: ChatRequest, next: StreamNext) -> AsyncIterator[StreamEvent]:
        turn = _Turn(request, self.reset_tool_choice)
        hooks = self._hooks()
        if turn.waiting is not None:
            ended: list[ChatResponse] = []
            async with closing_stream(self._settle_events(turn, hooks, ended)) as settling:
                async for event in settling:
                    yield event
            if ended:
                yield ResponseCompleted(ended[0])
                return
        while True:
            response: ChatResponse | None = None
            async with closing_stream(next(turn.request)) as events:
                async for event in events:
                    if isinstance(event, ResponseCompleted):
                        response = event.response
                    else:
                        yield event
            if response is None:
                raise StreamInterruptedError("the model's stream ended without a response")
            done = turn.model_answered(response)
            if done is not None:
                yield ResponseCompleted(done)
                return
            for call in response.tool_calls:
                yield ToolCallStarted(call)
            calls = response.tool_calls
            tools = (turn.request.find_tool(call.name) for call in calls)
            progress = reports_progress(tools)
            reported: set[int] = set()
            if progress or len(calls) > 1:
                # Progress, and each call's end, come while the round runs.
                done_round: list[ToolRound] = []
                work = partial(turn.execute, self.manager, response, hooks)
                ids = [call.id for call in calls]
                finished = partial(_finished_event, calls)
                updates = with_progress(
                    work, done_round, ids, progress=progress, on_finished=finished
                )
                async with closing_stream(updates) as running:
                    async for update in running:
                        if isinstance(update, ToolCallFinished):
                            reported.add(ids.index(update.call.id))
                        yield update
                tool_round = done_round[0]
            else:
                tool_round = await turn.execute(self.manager, response, hooks)
            for i, (call, result, message, duration) in enumerate(
                zip(
                    tool_round.calls,
                    tool_round.results,
                    tool_round.messages,
                    tool_round.durations,
                    strict=True,
                )
            ):
                if result.outcome != "deferred" and i not in reported:
                    yield ToolCallFinished(call, message, result.outcome, duration)
            done = await turn.round_finished(response, tool_round)
            if done is not None:
                yield ResponseCompleted(done)
                return

    async def _settle_events(
        self, turn: _Turn, hooks: tuple[ToolHook, ...], ended: list[ChatResponse]
    ) -> AsyncIterator[StreamEvent]:
        """A resumed turn's decided calls run as a round: each call's start, its progress
        (a resumed sub-chain's events) and its end as it ends. Puts the turn's response
        in `ended` when the settled calls end the turn."""
        waiting = turn.waiting
        assert waiting is not None
        decided = tuple(c for c in waiting.message.tool_calls if c.id in turn.decisions)
        for call in decided:
            yield ToolCallStarted(call)
        done_settle: list[ToolRound] = []
        updates = with_progress(
            partial(turn.settle, self.manager, hooks),
            done_settle,
            [call.id for call in decided],
            progress=reports_progress(turn.request.find_tool(c.name) for c in decided),
            on_finished=partial(_finished_event, decided),
        )
        told: set[str] = set()
        async with closing_stream(updates) as running:
            async for update in running:
                if isinstance(update, ToolCallFinished):
                    told.add(update.call.id)
                yield update
        settled = done_settle[0]
        for call, result, message, duration in zip(
            settled.calls, settled.results, settled.messages, settled.durations, strict=True
        ):
            if call.id not in told:
                yield ToolCallFinished(call, message, result.outcome, duration)
        done = turn.settled(settled)
        if done is not None:
            ended.append(done)


def _finished_event(
    calls: tuple[ToolCall, ...], index: int, result: ToolResult, seconds: float
) -> ToolCallFinished | None:
    """The `ToolCallFinished` of a call that just ended (none for one that waits)."""
    if result.outcome == "deferred":
        return None
    call = calls[index]
    return ToolCallFinished(call, result.to_message(call), result.outcome, seconds)


_NO_USAGE = Usage()
_FREE_CHOICES = (None, "auto", "none")
"""Tool choices that force no tool call: nothing to relax after a round."""


class _RoundUsage:
    """The usage of every model call made inside one round's tool calls (a chain called
    as a tool, nested ones, retried and failed ones too): counted as each call answers,
    as an enclosing `BudgetAdvisor` counts them (a `core.watchers.ModelCallWatcher`)."""

    __slots__ = ("usage",)

    def __init__(self) -> None:
        self.usage = _NO_USAGE

    async def before_model_call(self, request: ChatRequest) -> None:
        return None

    async def after_model_call(self, request: ChatRequest, response: ChatResponse) -> None:
        self.usage += response.usage


_SETTLED = "advisorchain.decisions_settled"
"""The turn-context key set once the loop settled a turn's decisions."""


class _Turn:
    """The state of one turn of the loop: transcript so far, messages added, usage.

    A resumed turn (`request.decisions`, its transcript ending with a waiting round)
    first settles the decided calls (`settle`, `settled`); its response starts with
    their results.
    """

    __slots__ = (
        "added",
        "decisions",
        "request",
        "reset_tool_choice",
        "usage",
        "waiting",
    )

    def __init__(self, request: ChatRequest, reset_tool_choice: bool = True) -> None:
        self.reset_tool_choice = reset_tool_choice
        self.usage = _NO_USAGE
        self.request = request
        self.added: list[Message] = []
        self.waiting: Waiting | None = None
        self.decisions: Mapping[str, Any] = {}
        decisions = request.decisions
        if decisions is None:
            messages = request.messages
            if len(messages) > 1 or (messages and type(messages[0]) is not UserMessage):
                self._check(None)  # calls that still wait need decisions first
            return
        if request.context.get(_SETTLED):  # already settled in this turn (a retry): unused
            self.request = request = replace(request, decisions=None)
            return
        self._check(decisions)

    def _check(self, decisions: Mapping[str, Any] | None) -> None:
        waiting = check_decisions(self.request.messages, decisions)
        if waiting is None:
            return
        self.request.context[_SETTLED] = True
        self.waiting = waiting
        self.decisions = decisions or {}
        self.request = replace(self.request, decisions=None)

    async def settle(self, manager: ToolCallingManager, hooks: tuple[ToolHook, ...]) -> ToolRound:
        """Settle the waiting round's decided calls through `hooks`."""
        waiting = self.waiting
        assert waiting is not None
        meter = _RoundUsage()
        with watched_by(meter):
            tool_round = await manager.settle(self.request, waiting, self.decisions, hooks=hooks)
        self.usage += meter.usage  # a sub-chain's resumed turn is this turn's spend
        results = list(tool_round.results)
        changed = False
        for i, result in enumerate(results):
            if result.outcome == "deferred":  # a resume settles what it decides
                results[i] = ToolResult(
                    content="Error: the call was deferred again while it was resumed, which "
                    "is not supported: answer without it.",
                    outcome="error",
                    value=result.value,
                )
                changed = True
        if changed:
            tool_round = ToolRound(
                calls=tool_round.calls,
                results=tuple(results),
                messages=tuple(
                    r.to_message(c) for r, c in zip(results, tool_round.calls, strict=True)
                ),
                durations=tool_round.durations,
            )
        return tool_round

    def settled(self, tool_round: ToolRound) -> ChatResponse | None:
        """Account for the settled calls; the final response if some calls still wait
        (the turn ends deferred again)."""
        waiting = self.waiting
        assert waiting is not None
        self.added.extend(tool_round.messages)
        self.request = self.request.appended(*tool_round.messages)
        decided = {c.id for c in tool_round.calls}
        left = tuple(waiting.deferred_call(c) for c in waiting.calls if c.id not in decided)
        if left:
            return ChatResponse(
                finish_reason="deferred",
                usage=self.usage,
                messages=tuple(self.added),
                deferred=left,
            )
        self._relax_tool_choice()
        return None

    def model_answered(self, response: ChatResponse) -> ChatResponse | None:
        """Account for a model response; the final response if it asks for no tools."""
        self.usage += response.usage
        if response.tool_calls and response.finish_reason != "deferred":
            return None
        self.added.extend(response.messages)
        return self._final(response)

    async def execute(
        self, manager: ToolCallingManager, response: ChatResponse, hooks: tuple[ToolHook, ...]
    ) -> ToolRound:
        meter = _RoundUsage()
        try:
            with watched_by(meter):
                tool_round = await manager.execute(self.request, response.message, hooks=hooks)
        except ToolCallLimitExceeded as exc:
            raise ToolCallLimitExceeded(
                str(exc),
                tool_name=exc.tool_name,
                messages=(*self.added, *response.messages[:-1], *exc.messages),
            ) from None
        self.usage += meter.usage  # every model call made inside the round's tool calls
        return tool_round

    async def round_finished(
        self, response: ChatResponse, tool_round: ToolRound
    ) -> ChatResponse | None:
        """Append a round's messages; the final response if the round was return-direct
        or some of its calls were deferred."""
        deferred = False
        for result in tool_round.results:  # one loop, no generator: run every round
            if result.outcome == "deferred":
                deferred = True
        if deferred:
            return self._defer(response, tool_round)
        self.added.extend(response.messages)
        self.added.extend(tool_round.messages)
        if tool_round.return_direct:
            answer = AssistantMessage(content=tool_round.direct_answer)
            self.added.append(answer)
            return self._final(
                ChatResponse(
                    message=answer,
                    finish_reason="return_direct",
                    model=response.model,
                    id=response.id,
                )
            )
        self.request = self.request.appended(*response.messages, *tool_round.messages)
        self._relax_tool_choice()
        return None

    def _defer(self, response: ChatResponse, tool_round: ToolRound) -> ChatResponse:
        """End the turn deferred: the round's assistant message records the waiting calls,
        the finished calls' results follow it."""
        records: dict[str, dict[str, Any]] = {}
        deferred: list[DeferredCall] = []
        finished: list[ToolMessage] = []
        for call, result, message in zip(
            tool_round.calls, tool_round.results, tool_round.messages, strict=True
        ):
            if result.outcome != "deferred":
                finished.append(message)
                continue
            kind = result.kind or "external"
            values = records[call.id] = record(kind, result.metadata, result.resume)
            resume = result.resume
            deferred.append(
                DeferredCall(
                    call=call,
                    kind=kind,
                    metadata=values["metadata"],
                    nested=resume.nested if resume is not None else (),
                    accepts=tuple(values["accepts"]),
                )
            )
        asked = with_records(response.message, records)
        for sent in response.messages:
            self.added.append(asked if sent is response.message else sent)
        self.added.extend(finished)
        return ChatResponse(
            finish_reason="deferred",
            usage=self.usage,
            messages=tuple(self.added),
            model=response.model,
            id=response.id,
            deferred=tuple(deferred),
        )

    def _relax_tool_choice(self) -> None:
        """After tools ran, stop forcing the model to call one (or it never answers)."""
        if self.reset_tool_choice and self.request.options.tool_choice not in _FREE_CHOICES:
            self.request = self.request.with_options(tool_choice="auto")

    def _final(self, response: ChatResponse) -> ChatResponse:
        # `message` is derived: the answer is the last assistant message of the turn
        return ChatResponse(
            finish_reason=response.finish_reason,
            usage=self.usage,
            messages=tuple(self.added),
            model=response.model,
            id=response.id,
            deferred=response.deferred,
        )


__all__ = ["ToolCallingAdvisor"]

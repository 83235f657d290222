"""`ToolCallingAdvisor`: the tool loop, as one link of the chain."""

from __future__ import annotations

import copy
import uuid
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import replace
from functools import partial
from typing import Literal

from ..core._progress import reports_progress, with_progress
from ..core._streams import closing_stream
from ..core.advisor import Advisor, CallNext, ChainView, Placement, StreamNext
from ..core.chain import resumed_events
from ..core.errors import StreamInterruptedError, ToolCallLimitExceeded
from ..core.events import (
    ResponseCompleted,
    StreamEvent,
    ToolCallDelta,
    ToolCallFinished,
    ToolCallStarted,
)
from ..core.invocation import ToolHook, ToolInvocation, ToolResult
from ..core.manager import ToolCallingManager, ToolRound
from ..core.messages import AssistantMessage, Message, ToolCall
from ..core.request import ChatRequest
from ..core.response import ChatResponse
from ..core.subchain import SubchainSuspendedError, bounded_by, suspended_turn
from ..core.suspension import PendingApproval, Suspension, SuspensionHandler
from ..core.usage import Usage


class ToolCallingAdvisor(Advisor):
    """Runs the tool loop: call the rest of the chain, execute the tools it asks for, repeat.

    Control flow: calls `next`; while the response asks for tools, executes them (one
    round, concurrently, results in call order) and calls `next` again with the
    assistant message and one tool message per call appended. It stops when the model
    answers without tool calls, when every call of a round is return-direct
    (`finish_reason="return_direct"`, the results are the answer), or at the call limits
    (bounded: by default 150 calls per turn), or when a `call_tool` hook answered a call
    with a `pending` result (a deferred approval): then the turn ends with
    `finish_reason="approval_pending"`, the round's assistant message as `message`, the
    finished calls' results in `messages`, and a `PendingApproval` naming the waiting
    calls. Before returning that response, the loop awaits the suspension handlers that
    hooks registered in the turn's `request.context` (`core.suspension.on_suspend`) with
    the whole turn, so a hook saves it wherever it sits in the chain. `Chain.resume`
    continues it: the continued turn's response (and stream) starts with the results of
    the calls that waited. A chain called as a tool whose turn suspended answers with a
    pending result carrying that turn's `Suspension` (kept in this turn's
    `Suspension.inner`); if no link saved it (no `ApprovalAdvisor` here), the call is
    answered with a `SubchainSuspendedError` error result instead, as nothing could
    resume it. Only the links after it are called again each round; the
    links before it see the whole turn once.

    The returned response carries the usage of every round, including every model call
    made inside its tool calls by a chain (a sub-agent's, also one that failed or was
    retried; as an enclosing `BudgetAdvisor` counts them), and, in `messages`, every
    message the turn added. Streaming passes text deltas through as they arrive, hides
    tool-call fragments, and emits `ToolCallStarted` / `ToolCallFinished`, and between
    them the `ToolProgress` of tools that report it (MCP tools, chains as tools).

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
        if turn.resumption is not None:
            for event in resumed_events(turn.resumption):
                yield event
        while True:
            response: ChatResponse | None = None
            async with closing_stream(next(turn.request)) as events:
                async for event in events:
                    if isinstance(event, ResponseCompleted):
                        response = event.response
                    elif not isinstance(event, ToolCallDelta):
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
                if result.outcome != "pending" and i not in reported:
                    yield ToolCallFinished(call, message, result.outcome, duration)
            done = await turn.round_finished(response, tool_round)
            if done is not None:
                yield ResponseCompleted(done)
                return


def _finished_event(
    calls: tuple[ToolCall, ...], index: int, result: ToolResult, seconds: float
) -> ToolCallFinished | None:
    """The `ToolCallFinished` of a call that just ended (none for one that waits)."""
    if result.outcome == "pending":
        return None
    call = calls[index]
    return ToolCallFinished(call, result.to_message(call), result.outcome, seconds)


def _unsaved_subchains(tool_round: ToolRound) -> ToolRound:
    """`tool_round` with each call whose sub-chain turn suspended, but that no link of
    this chain saves for a resume (no `on_suspend` handler: no `ApprovalAdvisor`),
    answered with an error: a turn nobody can resume must not wait."""
    results = list(tool_round.results)
    changed = False
    for i, result in enumerate(results):
        if suspended_turn(result) and result.on_suspend is None and result.metadata.get("subchain"):
            results[i] = ToolResult(
                content="Error: SubchainSuspendedError: the sub-agent stopped waiting for an "
                "approval, and this chain cannot wait for it (it has no ApprovalAdvisor).",
                outcome="error",
                value=result.value,
                error=SubchainSuspendedError("a sub-chain's turn suspended, nothing saves it"),
            )
            changed = True
    if not changed:
        return tool_round
    return replace(
        tool_round,
        results=tuple(results),
        messages=tuple(r.to_message(c) for r, c in zip(results, tool_round.calls, strict=True)),
    )


_NO_USAGE = Usage()
_FREE_CHOICES = (None, "auto", "none")
"""Tool choices that force no tool call: nothing to relax after a round."""


class _RoundUsage:
    """The usage of every model call made inside one round's tool calls (a chain called
    as a tool, nested ones, retried and failed ones too): counted as each call answers,
    as an enclosing `BudgetAdvisor` counts them (`core.subchain.EnclosingLimit`)."""

    __slots__ = ("usage",)

    def __init__(self) -> None:
        self.usage = _NO_USAGE

    async def before_model_call(self, request: ChatRequest) -> None:
        return None

    async def after_model_call(self, request: ChatRequest, response: ChatResponse) -> None:
        self.usage += response.usage


class _Turn:
    """The state of one turn of the loop: transcript so far, messages added, usage.

    A resumed turn (`request.resumption` set) starts with the results the resume produced
    as messages already added; its rounds go on without the resumption, so nothing
    inside the loop (a nested chain's loop) takes it again.
    """

    __slots__ = (
        "added",
        "initial",
        "request",
        "reset_tool_choice",
        "resumed_count",
        "resumption",
        "usage",
    )

    def __init__(self, request: ChatRequest, reset_tool_choice: bool = True) -> None:
        self.reset_tool_choice = reset_tool_choice
        self.usage = _NO_USAGE
        resumption = self.resumption = request.resumption
        if resumption is None:
            self.initial = self.request = request
            self.added: list[Message] = []
            self.resumed_count = 0
            return
        self.initial = self.request = replace(request, resumption=None)
        self.added = list(resumption.messages)
        self.resumed_count = len(self.added)
        for settled in resumption.calls:  # a resumed sub-chain's turn is this turn's spend
            self.usage += settled.usage
        self._relax_tool_choice()  # the resume ran the waiting round's tools

    def model_answered(self, response: ChatResponse) -> ChatResponse | None:
        """Account for a model response; the final response if it asks for no tools."""
        self.usage += response.usage
        if response.tool_calls and response.finish_reason not in ("approval_pending",):
            return None
        self.added.extend(response.messages)
        return self._final(response)

    async def execute(
        self, manager: ToolCallingManager, response: ChatResponse, hooks: tuple[ToolHook, ...]
    ) -> ToolRound:
        meter = _RoundUsage()
        try:
            with bounded_by(meter):
                tool_round = await manager.execute(self.request, response.message, hooks=hooks)
        except ToolCallLimitExceeded as exc:
            raise ToolCallLimitExceeded(
                str(exc),
                tool_name=exc.tool_name,
                messages=(*self.added, *response.messages[:-1], *exc.messages),
            ) from None
        self.usage += meter.usage  # every model call made inside the round's tool calls
        for result in tool_round.results:
            if result.outcome == "pending":
                return _unsaved_subchains(tool_round)
        return tool_round

    async def round_finished(
        self, response: ChatResponse, tool_round: ToolRound
    ) -> ChatResponse | None:
        """Append a round's messages; the final response if the round was return-direct
        or waits for a decision (then suspended: its handlers have saved it)."""
        self.added.extend(response.messages)
        pending = False
        for result in tool_round.results:  # one loop, no generator: run every round
            if result.outcome == "pending":
                pending = True
        if pending:
            return await self._suspend(response, tool_round)
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

    async def _suspend(self, response: ChatResponse, tool_round: ToolRound) -> ChatResponse:
        """End the turn with its `Suspension`, after awaiting the pending results' handlers."""
        waiting = []
        handlers: list[SuspensionHandler] = []
        inner: list[tuple[str, Suspension]] = []
        for call, result, message in zip(
            tool_round.calls, tool_round.results, tool_round.messages, strict=True
        ):
            if result.outcome != "pending":
                self.added.append(message)
                continue
            waiting.append(call)
            if result.on_suspend is not None and result.on_suspend not in handlers:
                handlers.append(result.on_suspend)
            if result.suspension is not None:
                inner.append((call.id, result.suspension))
        suspension = Suspension(
            pending=PendingApproval(id=f"approval_{uuid.uuid4().hex}", calls=tuple(waiting)),
            # a resumed turn's first messages are already at the end of its initial transcript
            request=self.initial,
            messages=tuple(self.added[self.resumed_count :]),
            inner=tuple(inner),
        )
        for handler in handlers:
            await handler(suspension)
        return ChatResponse(
            finish_reason="approval_pending",
            usage=self.usage,
            messages=tuple(self.added),
            model=response.model,
            id=response.id,
            suspension=suspension,
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
            suspension=response.suspension,
        )

"""`ToolCallingAdvisor`: the tool loop, as one link of the chain."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable, Mapping
from functools import partial
from typing import Literal

from ..core._progress import reports_progress, with_progress
from ..core._streams import closing_stream
from ..core.advisor import Advisor, CallNext, StreamNext
from ..core.errors import StreamInterruptedError, ToolCallLimitExceeded
from ..core.events import (
    ResponseCompleted,
    StreamEvent,
    ToolCallDelta,
    ToolCallFinished,
    ToolCallStarted,
)
from ..core.invocation import ToolInvocation
from ..core.manager import ToolCallingManager, ToolRound
from ..core.messages import AssistantMessage, Message
from ..core.request import ChatRequest
from ..core.response import ChatResponse, PendingApproval
from ..core.suspension import SuspendedTurn, suspend, take_resumed
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
    the calls that waited. Only the links after it are called again each round; the
    links before it see the whole turn once.

    The returned response carries the usage of every round and, in `messages`, every
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

    @property
    def tool_loop(self) -> ToolCallingManager:
        """This link runs the tool loop with `manager`: the links after it are inside it."""
        return self.manager

    async def call(self, request: ChatRequest, next: CallNext) -> ChatResponse:
        turn = _Turn(request, self.reset_tool_choice)
        while True:
            response = await next(turn.request)
            done = turn.model_answered(response)
            if done is not None:
                return done
            tool_round = await turn.execute(self.manager, response)
            done = turn.round_finished(response, tool_round)
            if done is not None:
                await turn.suspend_if_waiting(done)
                return done

    async def stream(self, request: ChatRequest, next: StreamNext) -> AsyncIterator[StreamEvent]:
        turn = _Turn(request, self.reset_tool_choice)
        for event in turn.resumed_events:
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
            tools = (turn.request.find_tool(call.name) for call in response.tool_calls)
            if reports_progress(tools):  # their ToolProgress events come while they run
                done_round: list[ToolRound] = []
                work = partial(turn.execute, self.manager, response)
                async with closing_stream(with_progress(work, done_round)) as progress:
                    async for update in progress:
                        yield update
                tool_round = done_round[0]
            else:
                tool_round = await turn.execute(self.manager, response)
            for call, result, message, duration in zip(
                tool_round.calls,
                tool_round.results,
                tool_round.messages,
                tool_round.durations,
                strict=True,
            ):
                if result.outcome != "pending":
                    yield ToolCallFinished(call, message, result.outcome, duration)
            done = turn.round_finished(response, tool_round)
            if done is not None:
                await turn.suspend_if_waiting(done)
                yield ResponseCompleted(done)
                return


class _Turn:
    """The state of one turn of the loop: transcript so far, messages added, usage.

    A resumed turn starts with the results the resume produced as messages already added.
    """

    __slots__ = (
        "added",
        "initial",
        "request",
        "reset_tool_choice",
        "resumed_count",
        "resumed_events",
        "usage",
    )

    def __init__(self, request: ChatRequest, reset_tool_choice: bool = True) -> None:
        self.initial = request
        self.request = request
        self.reset_tool_choice = reset_tool_choice
        resumed = take_resumed(request.context)
        self.added: list[Message] = list(resumed.messages) if resumed else []
        self.resumed_count = len(self.added)
        self.resumed_events = resumed.events if resumed else ()
        self.usage = Usage()
        if resumed:  # the resume ran the waiting round's tools
            self._relax_tool_choice()

    def model_answered(self, response: ChatResponse) -> ChatResponse | None:
        """Account for a model response; the final response if it asks for no tools."""
        self.usage += response.usage
        if response.tool_calls and response.finish_reason not in ("approval_pending",):
            return None
        self.added.extend(response.messages)
        return self._final(response)

    async def execute(self, manager: ToolCallingManager, response: ChatResponse) -> ToolRound:
        try:
            return await manager.execute(self.request, response.message)
        except ToolCallLimitExceeded as exc:
            raise ToolCallLimitExceeded(
                str(exc),
                tool_name=exc.tool_name,
                messages=(*self.added, *response.messages[:-1], *exc.messages),
            ) from None

    def round_finished(self, response: ChatResponse, tool_round: ToolRound) -> ChatResponse | None:
        """Append a round's messages; the final response if the round was return-direct
        or waits for an approval."""
        self.added.extend(response.messages)
        results = tool_round.results
        for result in results:
            if isinstance(result.value, ChatResponse):  # a chain called as a tool
                self.usage += result.value.usage
        waiting = tuple(
            [c for c, r in zip(tool_round.calls, results, strict=True) if r.outcome == "pending"]
        )
        if waiting:
            self.added.extend(
                m
                for m, r in zip(tool_round.messages, tool_round.results, strict=True)
                if r.outcome != "pending"
            )
            return self._final(
                ChatResponse(
                    message=response.message,
                    finish_reason="approval_pending",
                    model=response.model,
                    id=response.id,
                    pending_approval=PendingApproval(
                        id=f"approval_{uuid.uuid4().hex}", calls=waiting
                    ),
                )
            )
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

    def _relax_tool_choice(self) -> None:
        """After tools ran, stop forcing the model to call one (or it never answers)."""
        if self.reset_tool_choice and self.request.options.tool_choice not in (
            None,
            "auto",
            "none",
        ):
            self.request = self.request.with_options(tool_choice="auto")

    async def suspend_if_waiting(self, done: ChatResponse) -> None:
        """Hand a turn that ends waiting for approval to the suspension handlers."""
        if done.pending_approval is None:
            return
        # a resumed turn's first messages are already at the end of its initial transcript
        added = done.messages[self.resumed_count :]
        turn = SuspendedTurn(pending=done.pending_approval, request=self.initial, messages=added)
        await suspend(self.request.context, turn)

    def _final(self, response: ChatResponse) -> ChatResponse:
        # `message` is derived: the answer is the last assistant message of the turn
        return ChatResponse(
            finish_reason=response.finish_reason,
            usage=self.usage,
            messages=tuple(self.added),
            model=response.model,
            id=response.id,
            pending_approval=response.pending_approval,
        )

"""Deferred tool calls in and out of the UI protocols: the one place that knows the
chain's deferral API.

Out: a turn that ended with `finish_reason == "deferred"` is kept server-side in a
`DeferredTurns` store (its whole transcript: the messages the turn ran on and its
`response.messages`, whose assistant message records the waiting calls) under a fresh,
unguessable token, and its `response.deferred` calls become `WaitingCall`s, each with a
protocol-level id (`"{token}:{call id}"`) that the client sends back with its decision.

In: `UiTurn.resume` takes the token out of the store (once: a token resumes one turn),
checks that every decision names one of that turn's waiting calls, and runs
`chain.stream(kept transcript, decisions={call id: decision})`. The transcript never
comes from the client: clients do not carry the records a resume needs, and what a client
sends is not trusted to say what ran or what waits. The tools and tool context of the
resume are the server's too. Only approvals are offered to a UI; a turn that waits on
anything else (an external result, an elicitation, a sub-agent's nested calls) ends in an
error event.
"""

from __future__ import annotations

import secrets
from collections import OrderedDict
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..core.chain import Chain
from ..core.deferred import Approve, DeferredCall, Reject
from ..core.events import StreamEvent
from ..core.messages import Message, ToolCall
from ..core.response import ChatResponse
from ..core.tools import Tool

__all__ = [
    "DecisionError",
    "DeferredTurns",
    "UiDecision",
    "UiTurn",
    "WaitingCall",
    "decided_calls",
]

UiDecision = Approve | Reject
"""What a client's answer becomes: run the call (maybe with edited arguments) or not."""


class DecisionError(ValueError):
    """The client's decisions do not name the waiting calls of one turn this server
    keeps, or a turn waits on something a UI cannot decide."""


@dataclass(frozen=True, slots=True)
class WaitingCall:
    """A tool call waiting for the user's decision; `id` is the protocol's interrupt or
    approval id, which the decision must name; `deferred` is the chain's record of it."""

    id: str
    deferred: DeferredCall

    @property
    def call(self) -> ToolCall:
        """The waiting `ToolCall`."""
        return self.deferred.call


@dataclass(frozen=True, slots=True)
class _Kept:
    transcript: tuple[Message, ...]
    call_ids: frozenset[str]


class DeferredTurns:
    """The transcripts of deferred turns a protocol app may resume, in memory, by token.

    Holds at most `max_turns`; the oldest is forgotten first (its calls then cannot be
    resumed: the client gets the protocol's error event). A token is taken out when a
    resume uses it, so a decision cannot run a call twice.
    """

    def __init__(self, max_turns: int = 1024) -> None:
        if isinstance(max_turns, bool) or not isinstance(max_turns, int) or max_turns < 1:
            raise ValueError("max_turns must be a positive int")
        self.max_turns = max_turns
        self._turns: OrderedDict[str, _Kept] = OrderedDict()

    def __len__(self) -> int:
        return len(self._turns)

    def keep(
        self, transcript: Sequence[Message], deferred: Sequence[DeferredCall]
    ) -> tuple[WaitingCall, ...]:
        """Keep `transcript` (ending with the deferred turn's messages) and return its
        waiting calls with their protocol ids. Raises `DecisionError` when a call waits
        on anything but an approval (nothing is kept then)."""
        for d in deferred:
            if d.kind != "approval" or d.nested or "approve" not in d.accepts:
                raise DecisionError(
                    f"a call waits for {d.kind!r}, which this app cannot offer to a UI"
                )
        token = secrets.token_urlsafe(24)
        self._turns[token] = _Kept(tuple(transcript), frozenset(d.id for d in deferred))
        while len(self._turns) > self.max_turns:
            self._turns.popitem(last=False)
        return tuple(WaitingCall(f"{token}:{d.id}", d) for d in deferred)

    def take(
        self, decisions: Sequence[tuple[str, UiDecision]]
    ) -> tuple[tuple[Message, ...], dict[str, UiDecision]]:
        """The kept transcript and the decisions by call id for `(waiting id, decision)`
        pairs, all of one kept turn; the turn is forgotten. Raises `DecisionError` (and
        forgets nothing) for no decisions, an unknown token, a call that is not one of
        the turn's waiting calls, or two decisions for one call."""
        if not decisions:
            raise DecisionError("no decisions")
        tokens: set[str] = set()
        by_call: dict[str, UiDecision] = {}
        for waiting_id, decision in decisions:
            token, call_id = _split(waiting_id)
            tokens.add(token)
            if call_id in by_call:
                raise DecisionError("two decisions for one call")
            by_call[call_id] = decision
        if len(tokens) != 1:
            raise DecisionError("decisions for more than one waiting turn")
        (token,) = tokens
        kept = self._turns.get(token)
        if kept is None:
            raise DecisionError("no waiting turn has this id (unknown, used or expired)")
        if not by_call.keys() <= kept.call_ids:
            raise DecisionError("a decision names a call that does not wait")
        del self._turns[token]
        return kept.transcript, by_call


def _split(waiting_id: str) -> tuple[str, str]:
    token, sep, call_id = waiting_id.partition(":")
    if not sep or not token or not call_id:
        raise DecisionError("not an approval id")
    return token, call_id


def decided_calls(decisions: Sequence[tuple[str, UiDecision]]) -> set[str]:
    """The ids of the tool calls `decisions` decide (the client has seen those calls)."""
    return {waiting_id.partition(":")[2] for waiting_id, _ in decisions}


class UiTurn:
    """One turn a protocol app runs for a request, new (`start`) or resumed (`resume`),
    with the server's tools and tool context; `waiting` keeps a deferred end of it."""

    def __init__(
        self,
        chain: Chain,
        store: DeferredTurns,
        *,
        tools: Iterable[Tool] = (),
        tool_context: Mapping[str, Any] | None = None,
    ) -> None:
        self.chain = chain
        self.store = store
        self.tools = tuple(tools)
        self.tool_context = tool_context
        self.transcript: tuple[Message, ...] = ()

    def start(self, transcript: Sequence[Message]) -> AsyncIterator[StreamEvent]:
        """The stream of a new turn on `transcript`."""
        self.transcript = tuple(transcript)
        return self.chain.stream(
            list(self.transcript), tools=self.tools, tool_context=self.tool_context
        )

    def resume(self, decisions: Sequence[tuple[str, UiDecision]]) -> AsyncIterator[StreamEvent]:
        """The stream of the kept turn these decisions resume: `(waiting id, decision)`
        pairs; raises `DecisionError` (see `DeferredTurns.take`) before anything runs."""
        transcript, by_call = self.store.take(decisions)
        self.transcript = transcript
        return self.chain.stream(
            list(transcript),
            decisions=by_call,
            tools=self.tools,
            tool_context=self.tool_context,
        )

    def waiting(self, response: ChatResponse) -> tuple[WaitingCall, ...]:
        """The calls `response` (this turn's end) waits on, kept for a resume; none
        when it did not end deferred. Raises `DecisionError` as `DeferredTurns.keep`."""
        if response.finish_reason != "deferred" or not response.deferred:
            return ()
        return self.store.keep([*self.transcript, *response.messages], response.deferred)

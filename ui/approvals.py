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
resume are the server's too.

A sub-agent (a chain called as a tool, `chain_tool`) whose turn ended deferred makes
its call wait with the sub-agent's own waiting calls nested in it. Each nested approval
is offered as one more `WaitingCall` whose id names its path (`"{token}:{sub-agent call
id}:{nested call id}"`, deeper sub-agents adding ids), with `within` the sub-agent calls
around it; the decisions come back as the mapping the chain's resume takes for such a
call (`{sub-agent call id: {nested call id: decision}}`). Every nested approval of one
sub-agent call is decided at once (a sub-agent resumes once). Only approvals are offered
to a UI; a turn that waits on anything else (an external result, an elicitation) ends in
an error event.
"""

from __future__ import annotations

import secrets
from collections import OrderedDict
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..core.chain import Chain
from ..core.deferred import Approve, Decision, DeferredCall, Reject
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
    "decided_paths",
]

UiDecision = Approve | Reject
"""What a client's answer becomes: run the call (maybe with edited arguments) or not."""


class DecisionError(ValueError):
    """The client's decisions do not name the waiting calls of one turn this server
    keeps, or a turn waits on something a UI cannot decide."""


@dataclass(frozen=True, slots=True)
class WaitingCall:
    """A tool call waiting for the user's decision; `id` is the protocol's interrupt or
    approval id, which the decision must name; `deferred` is the chain's record of it;
    `within` the sub-agent calls it waits inside, outermost first (empty for a call of
    the served chain's own model)."""

    id: str
    deferred: DeferredCall
    within: tuple[DeferredCall, ...] = ()

    @property
    def call(self) -> ToolCall:
        """The waiting `ToolCall`."""
        return self.deferred.call

    @property
    def path(self) -> tuple[str, ...]:
        """The call ids from the served chain's call down to this one."""
        return (*(d.id for d in self.within), self.deferred.id)


@dataclass(frozen=True, slots=True)
class _Kept:
    transcript: tuple[Message, ...]
    paths: frozenset[tuple[str, ...]]


def _approvals(
    deferred: DeferredCall, within: tuple[DeferredCall, ...] = ()
) -> list[tuple[tuple[DeferredCall, ...], DeferredCall]]:
    """The approvals a UI decides for one waiting call: the call, or the nested calls of
    a sub-agent's deferred turn. `DecisionError` for anything else."""
    if deferred.nested and "decisions" in deferred.accepts:
        found: list[tuple[tuple[DeferredCall, ...], DeferredCall]] = []
        for nested in deferred.nested:
            found.extend(_approvals(nested, (*within, deferred)))
        return found
    if deferred.kind != "approval" or deferred.nested or "approve" not in deferred.accepts:
        raise DecisionError(
            f"a call waits for {deferred.kind!r}, which this app cannot offer to a UI"
        )
    return [(within, deferred)]


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
        waiting approvals with their protocol ids (a sub-agent's nested approvals each one
        of them). Raises `DecisionError` when a call waits on anything but an approval
        (nothing is kept then)."""
        found = [pair for d in deferred for pair in _approvals(d)]
        token = secrets.token_urlsafe(24)
        waiting = tuple(
            WaitingCall(f"{token}:" + ":".join((*(w.id for w in within), d.id)), d, within)
            for within, d in found
        )
        self._turns[token] = _Kept(tuple(transcript), frozenset(w.path for w in waiting))
        while len(self._turns) > self.max_turns:
            self._turns.popitem(last=False)
        return waiting

    def take(
        self, decisions: Sequence[tuple[str, UiDecision]]
    ) -> tuple[tuple[Message, ...], dict[str, Decision]]:
        """The kept transcript and the decisions by call id for `(waiting id, decision)`
        pairs, all of one kept turn (a sub-agent's call decided with the mapping of its
        nested calls' decisions); the turn is forgotten. Raises `DecisionError` (and
        forgets nothing) for no decisions, an unknown token, a call that is not one of
        the turn's waiting calls, two decisions for one call, or a sub-agent call with
        some of its nested approvals undecided."""
        if not decisions:
            raise DecisionError("no decisions")
        tokens: set[str] = set()
        by_path: dict[tuple[str, ...], UiDecision] = {}
        for waiting_id, decision in decisions:
            token, path = _split(waiting_id)
            tokens.add(token)
            if path in by_path:
                raise DecisionError("two decisions for one call")
            by_path[path] = decision
        if len(tokens) != 1:
            raise DecisionError("decisions for more than one waiting turn")
        (token,) = tokens
        kept = self._turns.get(token)
        if kept is None:
            raise DecisionError("no waiting turn has this id (unknown, used or expired)")
        if not by_path.keys() <= kept.paths:
            raise DecisionError("a decision names a call that does not wait")
        started = {path[0] for path in by_path if len(path) > 1}
        if any(path[0] in started and path not in by_path for path in kept.paths):
            raise DecisionError("decide every approval inside a sub-agent's call at once")
        del self._turns[token]
        return kept.transcript, _nest(by_path)


def _nest(by_path: Mapping[tuple[str, ...], UiDecision]) -> dict[str, Decision]:
    """Decisions by path as the chain's resume takes them: a sub-agent's call decided
    by the mapping of its nested calls' decisions."""
    top: dict[str, Any] = {}
    for path, decision in by_path.items():
        level = top
        for call_id in path[:-1]:
            level = level.setdefault(call_id, {})
        level[path[-1]] = decision
    return top


def _split(waiting_id: str) -> tuple[str, tuple[str, ...]]:
    token, *path = waiting_id.split(":")
    if not token or not path or not all(path):
        raise DecisionError("not an approval id")
    return token, tuple(path)


def decided_calls(decisions: Sequence[tuple[str, UiDecision]]) -> set[str]:
    """The ids of the served chain's tool calls `decisions` decide (the client has seen
    those calls; a nested approval decides the sub-agent call around it)."""
    return {waiting_id.split(":")[1] for waiting_id, _ in decisions if ":" in waiting_id}


def decided_paths(decisions: Sequence[tuple[str, UiDecision]]) -> set[tuple[str, ...]]:
    """The paths (call ids, outermost first) of the calls `decisions` decide."""
    return {tuple(waiting_id.split(":")[1:]) for waiting_id, _ in decisions if ":" in waiting_id}


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

"""Deferred tool calls in and out of the UI protocols: the one place that knows the
chain's deferral API.

Out: a turn that ended waiting for decisions (`finish_reason == "approval_pending"`)
becomes `WaitingCall`s, each with a protocol-level id (`"{pending id}:{call id}"`) that
the client sends back with its decision. In: `resume_events` turns those ids and
decisions into `Chain.resume_stream(pending_id, decisions, ...)`.

The pending id is the `ApprovalAdvisor`'s random, unguessable id of the saved turn: it
is the capability to resume that turn. The tools and tool context of the resume are
the server's, never the client's. Calls of a sub-chain's suspended turn (nested
suspensions) are not offered to a UI: such a turn ends in an error event.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..advisors.approval import Approve, Reject
from ..core.chain import Chain
from ..core.events import StreamEvent
from ..core.messages import ToolCall
from ..core.response import ChatResponse
from ..core.tools import Tool

__all__ = [
    "DecisionError",
    "UiDecision",
    "WaitingCall",
    "decided_calls",
    "resume_events",
    "waiting_calls",
]

UiDecision = Approve | Reject
"""What a client's answer becomes: run the call (maybe with edited arguments) or not."""


class DecisionError(ValueError):
    """The client's decisions do not name the calls of one waiting turn."""


@dataclass(frozen=True, slots=True)
class WaitingCall:
    """A tool call waiting for the user's decision; `id` is the protocol's interrupt or
    approval id, which the decision must name."""

    id: str
    call: ToolCall


def waiting_calls(response: ChatResponse) -> tuple[WaitingCall, ...]:
    """The calls a finished turn waits on (none when it did not end waiting).

    Raises `DecisionError` for a turn whose waiting calls include a sub-chain's own
    suspended turn: a UI cannot resume it.
    """
    suspension = response.suspension
    if response.finish_reason != "approval_pending" or suspension is None:
        return ()
    if suspension.inner:
        raise DecisionError("a sub-agent's turn waits for approval; a UI cannot resume it")
    return tuple(WaitingCall(f"{suspension.id}:{call.id}", call) for call in suspension.calls)


def _split(waiting_id: str) -> tuple[str, str]:
    pending_id, sep, call_id = waiting_id.rpartition(":")
    if not sep or not pending_id or not call_id:
        raise DecisionError("not an approval id")
    return pending_id, call_id


def decided_calls(decisions: Sequence[tuple[str, UiDecision]]) -> set[str]:
    """The ids of the tool calls `decisions` decide (the client has seen those calls)."""
    return {waiting_id.rpartition(":")[2] for waiting_id, _ in decisions}


def resume_events(
    chain: Chain,
    decisions: Sequence[tuple[str, UiDecision]],
    *,
    tools: Iterable[Tool] = (),
    tool_context: Mapping[str, Any] | None = None,
) -> AsyncIterator[StreamEvent]:
    """The stream of the turn these decisions resume: `(waiting id, decision)` pairs,
    all of one waiting turn; raises `DecisionError` otherwise (before anything runs)."""
    if not decisions:
        raise DecisionError("no decisions")
    pending_ids: set[str] = set()
    by_call: dict[str, UiDecision] = {}
    for waiting_id, decision in decisions:
        pending_id, call_id = _split(waiting_id)
        pending_ids.add(pending_id)
        if call_id in by_call:
            raise DecisionError("two decisions for one call")
        by_call[call_id] = decision
    if len(pending_ids) != 1:
        raise DecisionError("decisions for more than one waiting turn")
    (pending_id,) = pending_ids
    return chain.resume_stream(pending_id, by_call, tools=tools, tool_context=tool_context)

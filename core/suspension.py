"""`Suspension`: a turn the tool loop ended because some of its calls wait for a decision.

A `call_tool` hook that cannot decide a call now (a deferred approval) answers it with a
`pending` `ToolResult`, optionally with an `on_suspend` handler. When the round ends, the
tool loop finishes the round's other calls, ends the turn with
`finish_reason="approval_pending"`, builds the `Suspension` (the whole turn as the loop saw
it, whatever the hook's position in the chain), awaits the handlers of the round's pending
results with it (to save it), and returns it as `ChatResponse.suspension`. `Chain.resume`
continues the turn through the typed `ChatRequest.resumption` (`core/resumption.py`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeAlias

from .messages import AssistantMessage, Message, ToolCall, ToolMessage
from .request import ChatRequest


@dataclass(frozen=True, slots=True, kw_only=True)
class PendingApproval:
    """Tool calls waiting for a human decision; `id` is what `Chain.resume` takes."""

    id: str
    calls: tuple[ToolCall, ...]


@dataclass(frozen=True, kw_only=True)
class Suspension:
    """A suspended turn: what waits, and everything a resume continues from.

    - `pending`: the id `Chain.resume` takes and the calls that wait.
    - `request`: the request the loop's turn started with: the transcript before the
      turn's rounds, the options, tools, tool context and conversation id.
    - `messages`: what the turn added, ending with the last round's assistant message and
      the results of its calls that did not wait (`finished`).
    - `inner`: for a call that is itself a suspended turn (a sub-chain used as a tool),
      that turn's `Suspension`, by call id; empty otherwise. A resume of the outer turn
      resumes the inner one first, through the call. `approvals` flattens the tree: every
      pending approval a human decides on; `decisions(...)` builds what `Chain.resume`
      of this (outermost) turn takes for them.

    It is never sent to a model; it holds the tool context, so do not log it whole.
    """

    pending: PendingApproval
    request: ChatRequest
    messages: tuple[Message, ...]
    inner: tuple[tuple[str, Suspension], ...] = ()

    @property
    def id(self) -> str:
        """The pending approval's id: what `Chain.resume` takes."""
        return self.pending.id

    @property
    def calls(self) -> tuple[ToolCall, ...]:
        """The calls that wait."""
        return self.pending.calls

    @property
    def transcript(self) -> tuple[Message, ...]:
        """The whole transcript up to the suspension: what a resume continues from."""
        return self.request.messages + self.messages

    @property
    def approvals(self) -> tuple[PendingApproval, ...]:
        """Every pending approval of the tree, depth first, in call order: this turn's own
        waiting calls (those that are no suspended turn themselves) under this turn's id,
        then those of each inner suspension. Each call appears exactly once."""
        nested = dict(self.inner)
        own = self._own(nested)
        found: list[PendingApproval] = [own] if own.calls else []
        for call in self.pending.calls:
            if call.id in nested:
                found.extend(nested[call.id].approvals)
        return tuple(found)

    def decisions(
        self,
        decide: Mapping[str, Mapping[str, Any]] | Callable[[PendingApproval, ToolCall], Any],
    ) -> dict[str, Any]:
        """The `decisions` that `Chain.resume(self.id, ...)` takes for the whole tree.

        `decide` gives each call of `approvals` its decision: a map from a pending
        approval's id to its calls' decisions by call id, or a function of the approval
        and the call. A call that is a suspended turn gets the decisions of that turn, a
        nested map, so call ids that repeat across levels never collide. Raises
        `KeyError` when the map misses a call.
        """
        nested = dict(self.inner)
        own = self._own(nested)
        decisions: dict[str, Any] = {}
        for call in self.pending.calls:
            if call.id in nested:
                decisions[call.id] = nested[call.id].decisions(decide)
            elif callable(decide):
                decisions[call.id] = decide(own, call)
            else:
                decisions[call.id] = decide[self.id][call.id]
        return decisions

    def _own(self, nested: Mapping[str, Suspension]) -> PendingApproval:
        """This turn's own waiting calls, under its id."""
        if not nested:
            return self.pending
        own = tuple(c for c in self.pending.calls if c.id not in nested)
        return PendingApproval(id=self.id, calls=own)

    @property
    def finished(self) -> tuple[ToolMessage, ...]:
        """The results of the suspended round's calls that did not wait, in call order."""
        found: list[ToolMessage] = []
        for message in reversed(self.messages):
            if isinstance(message, AssistantMessage):
                break
            if isinstance(message, ToolMessage):
                found.append(message)
        return tuple(reversed(found))


SuspensionHandler: TypeAlias = Callable[[Suspension], Awaitable[None]]
"""Awaited with the turn when it is suspended (to save it); an exception fails the turn."""

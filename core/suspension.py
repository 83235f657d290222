"""Suspending a turn and resuming it: what the tool loop hands over in both directions.

A `call_tool` hook that answers a call with a `pending` result (a deferred approval)
registers a handler with `on_suspend`. When the round ends, the tool loop ends the turn
with `finish_reason="approval_pending"` and, before it returns, awaits the handlers with
the `SuspendedTurn`: the whole turn as the loop saw it, whatever the hook's position in
the chain. A `TurnResumer` later answers `Chain.resume` with a `ResumedTurn`; the tool loop
of the continued turn starts from the results it carries.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from typing import Any, TypeAlias

from .events import StreamEvent
from .messages import Message
from .request import ChatRequest
from .response import PendingApproval

RESUMED = "advisorchain.resumed"
"""`request.context` key set by `Chain.resume` to the resumed approval's id, for the whole
continued turn: a link outside the loop (memory) reads it to recognise a resumed turn, whose
transcript is the suspended one and whose user message was already seen."""

_HANDLERS = "advisorchain.suspension_handlers"
_RESUMED_TURN = "advisorchain.resumed_turn"


@dataclass(frozen=True, kw_only=True)
class SuspendedTurn:
    """A turn the tool loop ended because some calls wait for a decision.

    `request` is the request the loop's turn started with: the transcript before the
    turn's rounds, the options, tools and conversation id. `messages` is what the turn
    added, ending with the last round's assistant message and the results of its calls
    that did not wait. `pending` names the waiting calls; its id is what `Chain.resume`
    takes.
    """

    pending: PendingApproval
    request: ChatRequest
    messages: tuple[Message, ...]

    @property
    def transcript(self) -> tuple[Message, ...]:
        """The whole transcript up to the suspension: what a resume continues from."""
        return self.request.messages + self.messages


SuspensionHandler: TypeAlias = Callable[[SuspendedTurn], Awaitable[None]]
"""Called with the turn when it is suspended (to save it); an exception fails the turn."""


def on_suspend(context: MutableMapping[str, Any], handler: SuspensionHandler) -> None:
    """Have the tool loop await `handler` if the turn of `context` ends suspended."""
    context.setdefault(_HANDLERS, []).append(handler)


async def suspend(context: MutableMapping[str, Any], turn: SuspendedTurn) -> None:
    """Await the handlers registered in `context`, in order, once (the tool loop calls it)."""
    handlers: list[SuspensionHandler] = context.pop(_HANDLERS, [])
    for handler in handlers:
        await handler(turn)


@dataclass(frozen=True, kw_only=True)
class ResumedTurn:
    """How a `TurnResumer` continues a suspended turn.

    `request` continues the turn through the whole chain: the saved transcript completed
    by `messages`, the results of the calls that waited (the resume ran or rejected them).
    `events` report those calls to a stream (`ToolCallStarted`, `ToolCallFinished`).
    """

    request: ChatRequest
    messages: tuple[Message, ...] = ()
    events: tuple[StreamEvent, ...] = ()


def start_resumed(turn: ResumedTurn, pending_id: str) -> None:
    """Mark `turn.request`'s turn as resumed and leave `turn` for its tool loop."""
    turn.request.context[RESUMED] = pending_id
    turn.request.context[_RESUMED_TURN] = turn


def take_resumed(context: MutableMapping[str, Any]) -> ResumedTurn | None:
    """The resumed turn's results, for the first taker: the tool loop (or `Chain` without one)."""
    taken = context.pop(_RESUMED_TURN, None)
    return taken if isinstance(taken, ResumedTurn) else None

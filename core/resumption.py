"""`Resumption`: how `Chain.resume` hands a continued turn to its tool loop.

A typed field of the request (`ChatRequest.resumption`), set by `Chain.resume` on the
request that continues a suspended turn: the results the resume produced for the calls
that waited. The chain's tool loop starts from them (they open the turn's response and,
on a stream, are reported first) and sends its rounds on without the field; links
outside the loop read it to recognise a resumed turn.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .messages import ToolCall, ToolMessage
from .usage import Usage


@dataclass(frozen=True, slots=True, kw_only=True)
class ResumedCall:
    """One call of the suspended round, settled by the resume: run, refused, or unknown.

    `message` is the tool message that answers `call`; `outcome` a `ToolOutcome`;
    `duration` the seconds it took (zero for a call that was not run); `usage` what the
    call spent on models (a sub-chain's resumed turn), added to the continued turn's.
    """

    call: ToolCall
    message: ToolMessage
    outcome: str
    duration: float = 0.0
    usage: Usage = field(default_factory=Usage)


@dataclass(frozen=True, slots=True, kw_only=True)
class Resumption:
    """A resumed turn: the pending approval `id` it continues and the `calls` it settled,
    in call order. The request carrying it already ends with their messages."""

    id: str
    calls: tuple[ResumedCall, ...] = ()

    @property
    def messages(self) -> tuple[ToolMessage, ...]:
        """The tool messages of the settled calls, in call order."""
        return tuple(c.message for c in self.calls)

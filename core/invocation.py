"""One tool execution as the `call_tool` hooks see it, and its result."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

from .context import ToolContext
from .messages import ToolCall, ToolMessage
from .parts import DocumentPart, ImagePart, TextPart, text_of
from .tools import InvalidToolArguments, ValidatedArguments

if TYPE_CHECKING:
    from .deferred import Decision, DecisionKind, Deferral, DeferredCall
    from .request import ChatRequest
    from .tools import Tool

_NO_METADATA: Mapping[str, Any] = MappingProxyType({})

ToolOutcome: TypeAlias = Literal[
    "ok",
    "error",
    "rejected",
    "timeout",
    "invalid",
    "unknown_tool",
    "limit",
    "unknown",
    "cancelled",
    "deferred",
]
"""How a tool call ended: executed (`ok`), raised (`error`), refused by a human (`rejected`),
ran out of time (`timeout`), had bad arguments (`invalid`), named no attached tool
(`unknown_tool`), was over a call limit (`limit`), or has an outcome nobody knows (`unknown`,
e.g. a resume after a crash). `deferred` means "not finished now": the call waits for a
decision or for work done elsewhere (`ToolResult.defer`), and the tool loop ends the turn
with `finish_reason="deferred"` (`core/deferred.py`)."""


@dataclass(frozen=True, kw_only=True)
class ToolInvocation:
    """A validated tool call on its way to execution.

    `arguments` are the validated values the tool runs with (`ValidatedArguments`: after
    the schema's coercion, `{"amount": "150"}` for `amount: int` is `{"amount": 150}`),
    read-only; `validated` is the tool's own validated form of them. A hook may pass on a
    copy with other arguments (`with_arguments`), validated at once; arguments put in any
    other way (`dataclasses.replace`) are validated again before the next hook and before
    the tool, and a call whose arguments do not fit is answered with an `invalid` result,
    not run: every hook, policy and approver sees what runs.
    `request` is the request of the round that asked for the call (its `context` is the
    turn's shared map). `round_calls` are the calls of that round that run through the
    `call_tool` hooks (this one included, in call order), so a hook can act once for a
    whole round (an approver sees them together); empty when the call runs on its own.

    On a resumed turn, a call that waited is settled through the same hooks with
    `decision` (`Approve()`, `Reject(reason)`, `Result(value)` or a nested turn's
    decisions) and `deferred`, the `DeferredCall` it answers (its kind and metadata);
    both are `None` for every other call. A hook that deferred the call settles it; the
    innermost step runs the tool for `Approve()` (with the edited arguments, if any) and
    for a mapping, answers `Reject` and `Result` without running it.
    """

    tool: Tool
    call: ToolCall
    arguments: Mapping[str, Any]
    context: ToolContext
    request: ChatRequest
    validated: Any = field(default=None, repr=False, compare=False)
    round_calls: tuple[ToolCall, ...] = field(default=(), repr=False, compare=False)
    decision: Decision | None = field(default=None, repr=False, compare=False)
    deferred: DeferredCall | None = field(default=None, repr=False, compare=False)

    @property
    def name(self) -> str:
        """The tool's name."""
        return self.tool.name

    def with_arguments(self, arguments: Mapping[str, Any]) -> ToolInvocation:
        """A copy with other arguments, validated now: its `arguments` are the values the
        tool will run with. Arguments that do not fit the schema are kept as given (not
        validated): the next step answers the call with an `invalid` result."""
        try:
            checked = self.tool.check_arguments(arguments)
        except InvalidToolArguments:
            return replace(self, arguments=dict(arguments), validated=None)
        return replace(self, arguments=checked, validated=checked.validated)

    def checked(self) -> ToolInvocation:
        """This invocation with validated `arguments` (itself when they are already);
        raises `InvalidToolArguments` when they do not fit the tool's schema."""
        arguments = self.arguments
        if type(arguments) is ValidatedArguments and arguments.tool is self.tool:
            if self.validated is arguments.validated:
                return self
            return replace(self, validated=arguments.validated)
        checked = self.tool.check_arguments(arguments)
        return replace(self, arguments=checked, validated=checked.validated)


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolResult:
    """What a tool call produced, for the model: text, or parts (text, images, documents).

    `value` is the tool's raw return value (before conversion), `error` the exception a
    failed call raised; neither is ever sent to the model. `metadata` is what links say
    about the result (`{"cache_hit": True}`, `{"attempts": 2}`), never sent either.

    A `deferred` result (`ToolResult.defer(...)`) says the call cannot finish now: `kind`
    names why (`"approval"`, `"external"`, `"elicitation"`, `"subchain"`, or a link's own
    string), `metadata` is what whoever decides is shown (kept in the transcript, so plain
    JSON values), and `resume` how a resume settles it (`core.deferred.Deferral`).
    """

    content: str | tuple[TextPart | ImagePart | DocumentPart, ...]
    outcome: ToolOutcome = "ok"
    return_direct: bool = False
    value: Any = None
    error: BaseException | None = None
    metadata: Mapping[str, Any] = field(default_factory=lambda: _NO_METADATA)
    kind: str | None = None
    resume: Deferral | None = field(default=None, repr=False, compare=False)

    @classmethod
    def defer(
        cls,
        kind: str = "external",
        metadata: Mapping[str, Any] | None = None,
        *,
        content: str = "Waiting for a decision.",
        accepts: tuple[DecisionKind, ...] = ("result", "reject"),
        state: Any = None,
        result_schema: Mapping[str, Any] | None = None,
        nested: tuple[DeferredCall, ...] = (),
    ) -> ToolResult:
        """A result that defers the call: the turn ends with `finish_reason="deferred"`
        and the call in `response.deferred` (with `kind` and `metadata`), to be settled by
        a later `chain.call(..., decisions={call_id: ...})`.

        A tool returns it to hand the call to external work (a job, a webhook): resume
        with `Result(value)` (checked against `result_schema`, when given) and `value`
        becomes the call's result, converted as the tool's return value would be; or with
        `Reject(reason)`. `accepts` names the decisions the call takes; `state` is plain
        JSON a resume needs, kept in the transcript's record of the call (never shown to
        a model, but stored where the transcript is).
        """
        from .deferred import Deferral

        return cls(
            content=content,
            outcome="deferred",
            kind=kind,
            metadata=dict(metadata or {}),
            resume=Deferral(
                accepts=accepts, state=state, result_schema=result_schema, nested=nested
            ),
        )

    @property
    def text(self) -> str:
        """The result's text (its text parts joined, when it has parts)."""
        return text_of(self.content)

    @property
    def is_error(self) -> bool:
        """Whether the model should read this result as a failure."""
        return self.outcome != "ok"

    def to_message(self, call: ToolCall) -> ToolMessage:
        """The tool message that answers `call` with this result."""
        return ToolMessage(
            tool_call_id=call.id, name=call.name, content=self.content, is_error=self.is_error
        )


ToolNext: TypeAlias = Callable[[ToolInvocation], Awaitable[ToolResult]]
"""The rest of a tool execution after a `call_tool` hook (ends in the tool itself)."""

ToolHook: TypeAlias = Callable[[ToolInvocation, ToolNext], Awaitable[ToolResult]]
"""A `call_tool` hook, bound to its advisor."""


__all__ = ["ToolHook", "ToolInvocation", "ToolNext", "ToolOutcome", "ToolResult"]

"""Chains as tools (sub-agents): `Chain.as_tool(...)` builds a `Tool` whose call runs a
whole turn of another chain.

Control flow of one call: the model of the parent chain calls the tool; its arguments
become the child's prompt (the `task` text, or the arguments as JSON when you give an
input schema); the child runs one turn with only the named tool-context values; its
answer (or structured output) is the tool result. While the parent streams, the child
streams too, and each of its events reaches the parent's stream wrapped in a
`ToolProgress(call_id, event=...)`; its text never mixes into the parent's text.

A child turn that suspends (a deferred approval inside it) answers the call with a
`pending` `ToolResult` carrying the child's `Suspension`: the parent's tool loop ends the
parent turn too, its `Suspension.inner` holding the child's, and the parent's
`ApprovalAdvisor` saves the parent turn with the call as waiting for the child's approval
(`SUBCHAIN_APPROVAL` in the call's details). `Chain.resume` of the parent claims the
parent's approval, then runs the call once more with `resuming_context(...)`: the
handler then resumes the child's turn (`chain.resume`) instead of starting one, and its
answer is the call's result.

While the child runs inside a parent's tool call, the parent's `BudgetAdvisor` bounds it:
every model call of the child counts against the parent turn's budget as it happens
(`enclosing_limits`, checked by each chain's innermost model step).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Collection, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from ._checks import require_number
from ._progress import ProgressSink, current_progress_sink
from ._streams import closing_stream
from .context import ToolContext
from .errors import AdvisorChainError, ChainConfigurationError
from .events import ResponseCompleted, StreamEvent, ToolProgress
from .invocation import ToolResult
from .response import ChatResponse
from .tools import Tool

if TYPE_CHECKING:
    from .request import ChatRequest


class TurnRunner(Protocol):
    """What a sub-chain tool needs of the chain it runs (`core.chain.Chain` is one)."""

    async def call(self, prompt: str, *, tool_context: Mapping[str, Any]) -> ChatResponse: ...

    def stream(
        self, prompt: str, *, tool_context: Mapping[str, Any]
    ) -> AsyncIterator[StreamEvent]: ...

    async def resume(
        self, pending_id: str, decisions: Mapping[str, Any], *, tool_context: Mapping[str, Any]
    ) -> ChatResponse: ...

    def resume_stream(
        self, pending_id: str, decisions: Mapping[str, Any], *, tool_context: Mapping[str, Any]
    ) -> AsyncIterator[StreamEvent]: ...


SUBCHAIN_APPROVAL = "subchain_approval"
"""The detail (`ApprovalCall.details`) naming, for a call that waits for a sub-chain's
suspended turn, that turn's pending approval id."""

_RESUME_KEY = "advisorchain.subchain.resume"


@dataclass(frozen=True, slots=True)
class _Resume:
    pending_id: str
    decisions: Mapping[str, Any]


def resuming_context(
    context: ToolContext, pending_id: str, decisions: Mapping[str, Any]
) -> ToolContext:
    """`context` for running a sub-chain's call again to resume its suspended turn
    `pending_id` with `decisions` (what a resume of the parent turn runs it with)."""
    values = {**context, _RESUME_KEY: _Resume(pending_id, dict(decisions))}
    return ToolContext(
        values,
        call_id=context.call_id,
        tool_name=context.tool_name,
        conversation_id=context.conversation_id,
    )


def suspended_turn(result: ToolResult) -> bool:
    """Whether `result` answers a call whose turn suspended (a sub-chain's)."""
    return result.outcome == "pending" and result.suspension is not None


class EnclosingLimit(Protocol):
    """A limit of an enclosing turn that every model call made inside one of its tool
    calls counts against (a `BudgetAdvisor`'s, while a sub-chain runs)."""

    async def before_model_call(self, request: ChatRequest) -> None:
        """Raise to refuse the call (the limit is used up)."""
        ...

    async def after_model_call(self, request: ChatRequest, response: ChatResponse) -> None:
        """Account for the call's response."""
        ...


_limits: ContextVar[tuple[EnclosingLimit, ...]] = ContextVar(
    "advisorchain_enclosing_limits", default=()
)


def enclosing_limits() -> tuple[EnclosingLimit, ...]:
    """The limits of the turns whose tool calls enclose the current task, outermost first."""
    return _limits.get()


async def before_model_call(limits: tuple[EnclosingLimit, ...], request: ChatRequest) -> None:
    """Ask each enclosing limit, outermost first, before a model call (one may raise)."""
    for limit in limits:
        await limit.before_model_call(request)


async def after_model_call(
    limits: tuple[EnclosingLimit, ...], request: ChatRequest, response: ChatResponse
) -> None:
    """Account a model call's response to each enclosing limit."""
    for limit in limits:
        await limit.after_model_call(request, response)


@contextmanager
def bounded_by(limit: EnclosingLimit) -> Iterator[None]:
    """Within the block (a tool call), every model call counts against `limit` too."""
    token = _limits.set((*_limits.get(), limit))
    try:
        yield
    finally:
        _limits.reset(token)


_TASK_SCHEMA: Mapping[str, Any] = {
    "type": "object",
    "properties": {"task": {"type": "string", "description": "What to do, in full sentences."}},
    "required": ["task"],
}

_depth: ContextVar[int] = ContextVar("advisorchain_subchain_depth", default=0)


class SubchainError(AdvisorChainError):
    """A chain called as a tool could not answer (too deep, or it suspended)."""


class SubchainSuspendedError(SubchainError):
    """The chain called as a tool ended waiting for a deferred approval where its
    parent cannot wait with it: no link of the parent saved the parent turn (it has no
    `ApprovalAdvisor`), or the child suspended again while the parent resumed it. The
    parent gets an error result instead."""


def chain_tool(
    chain: TurnRunner,
    name: str,
    description: str,
    *,
    parameters: Mapping[str, Any] | None = None,
    context_keys: Collection[str] = (),
    requires_approval: bool = False,
    timeout: float | None = None,
    max_depth: int = 3,
) -> Tool:
    """A `Tool` that runs one turn of `chain` per call (see `Chain.as_tool`)."""
    require_number(max_depth, "max_depth", integer=True)
    if max_depth < 1:
        raise ChainConfigurationError("max_depth must be at least 1")
    if parameters is not None and not isinstance(parameters, Mapping):
        raise ChainConfigurationError(
            f"parameters must be a JSON schema (a dict), not {parameters!r:.80}"
        )
    if isinstance(context_keys, str):
        raise ChainConfigurationError("context_keys takes a collection of key names")
    keys = tuple(context_keys)
    schema = dict(parameters) if parameters is not None else dict(_TASK_SCHEMA)

    async def handler(arguments: dict[str, Any], context: ToolContext) -> ChatResponse | ToolResult:
        depth = _depth.get()
        if depth >= max_depth:
            raise SubchainError(
                f"the sub-agent {name!r} would run {depth + 1} levels deep (max_depth "
                f"{max_depth}): answer without it"
            )
        resume = context.get(_RESUME_KEY)
        values = {k: context[k] for k in keys if k in context and k != _RESUME_KEY}
        token = _depth.set(depth + 1)
        try:
            sink = current_progress_sink()
            if isinstance(resume, _Resume):
                if sink is None:
                    response = await chain.resume(
                        resume.pending_id, resume.decisions, tool_context=values
                    )
                else:
                    events = chain.resume_stream(
                        resume.pending_id, resume.decisions, tool_context=values
                    )
                    response = await _streamed(events, sink, context.call_id)
            else:
                prompt = _prompt(arguments, parameters is None)
                if sink is None:
                    response = await chain.call(prompt, tool_context=values)
                else:
                    events = chain.stream(prompt, tool_context=values)
                    response = await _streamed(events, sink, context.call_id)
        finally:
            _depth.reset(token)
        if response.suspension is None and response.finish_reason != "approval_pending":
            return response
        if response.suspension is None or isinstance(resume, _Resume):
            raise SubchainSuspendedError(
                f"the sub-agent {name!r} stopped again waiting for an approval while it was "
                "resumed, which a chain called as a tool does not support"
            )
        return ToolResult(
            content=f"Waiting for an approval inside the sub-agent {name!r}.",
            outcome="pending",
            value=response,
            suspension=response.suspension,
            metadata={"subchain": True},
        )

    return Tool(
        name,
        description,
        schema,
        handler,
        requires_approval=requires_approval,
        result_converter=_answer,
        timeout=timeout,
        metadata={"subchain": True, "reports_progress": True},
    )


def _prompt(arguments: Mapping[str, Any], is_task: bool) -> str:
    if is_task:
        return str(arguments.get("task", ""))
    return json.dumps(arguments, ensure_ascii=False, sort_keys=True)


async def _streamed(
    stream: AsyncIterator[StreamEvent], sink: ProgressSink, call_id: str
) -> ChatResponse:
    response: ChatResponse | None = None
    async with closing_stream(stream) as events:
        async for event in events:
            if isinstance(event, ResponseCompleted):
                response = event.response
            else:
                await sink.send(ToolProgress(call_id, event=event))
    if response is None:  # pragma: no cover - Chain.stream always ends with one
        raise SubchainError("the sub-agent's stream ended without a response")
    return response


def _answer(value: Any) -> str:
    """The tool result of a child turn: its structured output if it has one, else its text."""
    if not isinstance(value, ChatResponse):
        return str(value)
    output = getattr(value, "output", None)
    if output is not None:
        from .tools import default_result_converter

        return default_result_converter(output)
    return value.text


__all__ = [
    "SUBCHAIN_APPROVAL",
    "EnclosingLimit",
    "SubchainError",
    "SubchainSuspendedError",
    "after_model_call",
    "before_model_call",
    "bounded_by",
    "chain_tool",
    "enclosing_limits",
    "resuming_context",
    "suspended_turn",
]

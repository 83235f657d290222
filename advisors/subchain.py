"""Chains as tools (sub-agents): `chain_tool(Chain, ...)` builds a `Tool` whose call runs a
whole turn of another chain.

Control flow of one call: the model of the parent chain calls the tool; its arguments
become the child's prompt (the `task` text, or the arguments as JSON when you give an
input schema); the child runs one turn with only the named tool-context values; its
answer (or structured output) is the tool result. While the parent streams, the child
streams too, and each of its events (but the fragments of its model's tool calls, which
reach the parent as the calls' `ToolCallStarted`) reaches the parent's stream wrapped in a
`ToolProgress(call_id, event=...)`; its text never mixes into the parent's text.

A child turn that ends deferred (a deferred approval inside it, external work, a
question) defers the call: `ToolResult.defer("subchain", ...)` with the child's deferred
calls nested and the child's transcript as the call's state (kept in the parent's
transcript). The parent's turn ends deferred too, `response.deferred` holding this call
with the child's calls inside. A resume of the parent decides the call with a mapping of
the child's decisions (checked, nested ids included, before anything runs); the loop
runs the call once more, and the handler resumes the child's turn from its own
transcript (`chain.call(child_transcript, decisions=...)`) instead of starting one: its
answer is the call's result.

While the child runs inside a parent's tool call, the parent's `BudgetAdvisor` bounds it:
every model call of the child counts against the parent turn's budget as it happens
(the budget watches the tool call: `core/watchers.py`, which each chain's innermost model
step consults).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Collection, Mapping, Sequence
from contextvars import ContextVar
from typing import Any, Protocol

from ..core.checks import require_number
from ..core.context import ToolContext
from ..core.deferred import inner_transcript, transcript_state
from ..core.errors import AdvisorChainError, ChainConfigurationError
from ..core.events import ResponseCompleted, StreamEvent, ToolCallDelta, ToolProgress
from ..core.invocation import ToolResult
from ..core.messages import Message, UserMessage
from ..core.progress import ProgressSink, current_progress_sink
from ..core.response import ChatResponse
from ..core.streams import closing_stream
from ..core.tools import Tool, default_result_converter


class TurnRunner(Protocol):
    """What a sub-chain tool needs of the chain it runs (`Chain` is one): a turn on either
    path."""

    async def call(
        self,
        prompt: Sequence[Message],
        *,
        tool_context: Mapping[str, Any],
        decisions: Mapping[str, Any] | None = None,
    ) -> ChatResponse: ...

    def stream(
        self,
        prompt: Sequence[Message],
        *,
        tool_context: Mapping[str, Any],
        decisions: Mapping[str, Any] | None = None,
    ) -> AsyncIterator[StreamEvent]: ...


SUBCHAIN = "subchain"
"""The kind of a call deferred because the sub-chain it runs ended deferred."""


_TASK_SCHEMA: Mapping[str, Any] = {
    "type": "object",
    "properties": {"task": {"type": "string", "description": "What to do, in full sentences."}},
    "required": ["task"],
}

_depth: ContextVar[int] = ContextVar("advisorchain_subchain_depth", default=0)


class SubchainError(AdvisorChainError):
    """A chain called as a tool could not answer (too deep)."""


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
    """A `Tool` that runs one turn of `chain` per call (see `chain_tool`)."""
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
        values = {k: context[k] for k in keys if k in context}
        decisions = context.decision if isinstance(context.decision, Mapping) else None
        transcript = inner_transcript(context.state) if decisions is not None else None
        if transcript is None:
            decisions = None
            transcript = (UserMessage(content=_prompt(arguments, parameters is None)),)
        token = _depth.set(depth + 1)
        try:
            sink = current_progress_sink()
            turn = chain
            if sink is None:
                response = await turn.call(transcript, tool_context=values, decisions=decisions)
            else:
                events = turn.stream(transcript, tool_context=values, decisions=decisions)
                response = await _streamed(events, sink, context.call_id)
        finally:
            _depth.reset(token)
        if response.finish_reason != "deferred" or not response.deferred:
            return response
        return ToolResult.defer(
            SUBCHAIN,
            {"agent": name},
            content=f"Waiting inside the sub-agent {name!r}.",
            accepts=("decisions", "reject"),
            state=transcript_state((*transcript, *response.messages)),
            nested=response.deferred,
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
            elif not isinstance(event, ToolCallDelta):
                # the child's calls reach the parent as their `ToolCallStarted` (a link
                # that rewrites progress rewrites those arguments; fragments it cannot)
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
        return default_result_converter(output)
    return value.text


__all__ = ["SUBCHAIN", "SubchainError", "TurnRunner", "chain_tool"]

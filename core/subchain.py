"""Chains as tools (sub-agents): `Chain.as_tool(...)` builds a `Tool` whose call runs a
whole turn of another chain.

Control flow of one call: the model of the parent chain calls the tool; its arguments
become the child's prompt (the `task` text, or the arguments as JSON when you give an
input schema); the child runs one turn with only the named tool-context values; its
answer (or structured output) is the tool result. While the parent streams, the child
streams too, and each of its events reaches the parent's stream wrapped in a
`ToolProgress(call_id, event=...)`; its text never mixes into the parent's text.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Collection, Mapping
from contextvars import ContextVar
from typing import Any, Protocol

from ._progress import ProgressSink, current_progress_sink
from ._streams import closing_stream
from .context import ToolContext
from .errors import AdvisorChainError, ChainConfigurationError
from .events import ResponseCompleted, StreamEvent, ToolProgress
from .response import ChatResponse
from .tools import Tool


class TurnRunner(Protocol):
    """What a sub-chain tool needs of the chain it runs (`core.chain.Chain` is one)."""

    async def call(self, prompt: str, *, tool_context: Mapping[str, Any]) -> ChatResponse: ...

    def stream(
        self, prompt: str, *, tool_context: Mapping[str, Any]
    ) -> AsyncIterator[StreamEvent]: ...


_TASK_SCHEMA: Mapping[str, Any] = {
    "type": "object",
    "properties": {"task": {"type": "string", "description": "What to do, in full sentences."}},
    "required": ["task"],
}

_depth: ContextVar[int] = ContextVar("advisorchain_subchain_depth", default=0)


class SubchainError(AdvisorChainError):
    """A chain called as a tool could not answer (too deep, or it suspended)."""


class SubchainSuspendedError(SubchainError):
    """The chain called as a tool ended waiting for a deferred approval, which a
    sub-chain does not support yet: the parent gets an error result instead."""


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
    if max_depth < 1:
        raise ChainConfigurationError("max_depth must be at least 1")
    if isinstance(context_keys, str):
        raise ChainConfigurationError("context_keys takes a collection of key names")
    keys = tuple(context_keys)
    schema = dict(parameters) if parameters is not None else dict(_TASK_SCHEMA)

    async def handler(arguments: dict[str, Any], context: ToolContext) -> ChatResponse:
        depth = _depth.get()
        if depth >= max_depth:
            raise SubchainError(
                f"the sub-agent {name!r} would run {depth + 1} levels deep (max_depth "
                f"{max_depth}): answer without it"
            )
        prompt = _prompt(arguments, parameters is None)
        values = {k: context[k] for k in keys if k in context}
        token = _depth.set(depth + 1)
        try:
            sink = current_progress_sink()
            if sink is None:
                response = await chain.call(prompt, tool_context=values)
            else:
                response = await _streamed(chain, prompt, values, sink, context.call_id)
        finally:
            _depth.reset(token)
        if response.pending_approval is not None or response.finish_reason == "approval_pending":
            raise SubchainSuspendedError(
                f"the sub-agent {name!r} stopped waiting for an approval; approvals inside "
                "a chain called as a tool are not supported yet"
            )
        return response

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
    chain: TurnRunner,
    prompt: str,
    values: Mapping[str, Any],
    sink: ProgressSink,
    call_id: str,
) -> ChatResponse:
    response: ChatResponse | None = None
    async with closing_stream(chain.stream(prompt, tool_context=values)) as events:
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


__all__ = ["SubchainError", "SubchainSuspendedError", "chain_tool"]

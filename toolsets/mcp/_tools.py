"""A server tool as a chain `Tool`: the schema the model sees, the arguments the server
gets, the metadata the tool carries and the value the model reads."""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any, TypeAlias

from ...core.context import ToolContext
from ...core.tools import ToolDefinition
from ._content import McpCallResult, ResultPart
from ._errors import McpError
from ._hints import ToolHints

ToolFilter: TypeAlias = Callable[[ToolDefinition], bool]
"""Decides from a server tool's definition (its own name, unprefixed) whether to keep it."""


def context_mapping(
    definition: ToolDefinition, context_arguments: Mapping[str, str]
) -> dict[str, str]:
    """`{server argument: tool-context key}` for the arguments `definition` declares."""
    declared = definition.parameters.get("properties") or {}
    return {a: k for a, k in context_arguments.items() if a in declared}


def hide_arguments(schema: Mapping[str, Any], hidden: Collection[str]) -> dict[str, Any]:
    """`schema` without the `hidden` properties (nor their `required` entries)."""
    result = dict(schema)
    if not hidden:
        return result
    properties = dict(result.get("properties") or {})
    for name in hidden:
        properties.pop(name, None)
    result["properties"] = properties
    if "required" in result:
        result["required"] = [r for r in result["required"] if r not in hidden]
    return result


def with_context(
    arguments: Mapping[str, Any], context: ToolContext, mapped: Mapping[str, str]
) -> dict[str, Any]:
    """The arguments to send: the model's, with the mapped context values put in.

    Raises `McpError` when the context lacks a mapped value."""
    forwarded = {k: v for k, v in arguments.items() if k not in mapped}
    for argument, key in mapped.items():
        if key not in context:
            raise McpError(
                f"the tool context has no {key!r} value for the MCP argument {argument!r}"
            )
        forwarded[argument] = context[key]
    return forwarded


def tool_metadata(
    server: str,
    tool: str,
    hints: ToolHints,
    output_schema: Mapping[str, Any] | None,
) -> dict[str, Any]:
    """What a server tool's `Tool.metadata` says: its server and name, that it reports
    progress, whether the server calls it destructive, and its output schema."""
    metadata: dict[str, Any] = {"mcp_server": server, "mcp_tool": tool, "reports_progress": True}
    if hints.destructive:
        metadata["mcp_destructive"] = True
    if output_schema is not None:
        metadata["mcp_output_schema"] = output_schema
    return metadata


def for_model(value: Any) -> str | Sequence[ResultPart]:
    """A tool's value as the model reads it: an `McpCallResult`'s parts, else its text."""
    if isinstance(value, McpCallResult):
        return value.for_model()
    return str(value)


__all__ = [
    "ToolFilter",
    "context_mapping",
    "for_model",
    "hide_arguments",
    "tool_metadata",
    "with_context",
]

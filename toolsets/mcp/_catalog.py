"""A server's resources and prompts (`resources/list`, `prompts/list`) as values, and the
two tools that let a model browse the resources."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from ...core.context import ToolContext
from ...core.tools import Tool
from ._content import ResultPart

_MAX_DESCRIPTION = 2000


@dataclass(frozen=True, slots=True)
class McpResource:
    """A resource a server lists: its URI, name, description and media type."""

    uri: str
    name: str
    description: str | None = None
    mime_type: str | None = None


@dataclass(frozen=True, slots=True)
class McpPromptArgument:
    """An argument of a server's prompt."""

    name: str
    description: str | None = None
    required: bool = False


@dataclass(frozen=True, slots=True)
class McpPrompt:
    """A prompt (template) a server lists, with its arguments."""

    name: str
    description: str | None = None
    arguments: tuple[McpPromptArgument, ...] = ()


def resource_of(listed: Any) -> McpResource:
    """An SDK `Resource` as an `McpResource` (its description bounded)."""
    return McpResource(
        uri=str(listed.uri),
        name=str(listed.name),
        description=_short(listed.description),
        mime_type=listed.mime_type,
    )


def prompt_of(listed: Any) -> McpPrompt:
    """An SDK `Prompt` as an `McpPrompt` (descriptions bounded)."""
    return McpPrompt(
        name=str(listed.name),
        description=_short(listed.description),
        arguments=tuple(
            McpPromptArgument(
                name=str(a.name),
                description=_short(a.description),
                required=a.required is True,
            )
            for a in listed.arguments or ()
        ),
    )


def browsing_tools(
    server: str,
    prefix: str,
    timeout: float | None,
    resources: Callable[[], Awaitable[list[McpResource]]],
    read_resource: Callable[[str], Awaitable[tuple[ResultPart, ...]]],
) -> list[Tool]:
    """`{prefix}list_resources` and `{prefix}read_resource(uri)` over `resources()` and
    `read_resource(uri)`: both read-only and idempotent, each limited to `timeout` s."""

    async def list_resources(arguments: dict[str, Any], context: ToolContext) -> str:
        listed = await resources()
        lines = [
            f"{r.uri}"
            + (f" ({r.name})" if r.name else "")
            + (f": {r.description}" if r.description else "")
            for r in listed
        ]
        return "\n".join(lines) or "No resources."

    async def read(arguments: dict[str, Any], context: ToolContext) -> tuple[ResultPart, ...]:
        return await read_resource(str(arguments["uri"]))

    metadata = {"mcp_server": server}
    return [
        Tool(
            f"{prefix}list_resources",
            f"List the resources of the MCP server {server!r} (URI, name, description).",
            {"type": "object", "properties": {}},
            list_resources,
            metadata=metadata,
            read_only=True,
            idempotent=True,
            timeout=timeout,
        ),
        Tool(
            f"{prefix}read_resource",
            f"Read one resource of the MCP server {server!r} by its URI.",
            {
                "type": "object",
                "properties": {"uri": {"type": "string", "description": "The resource URI."}},
                "required": ["uri"],
            },
            read,
            metadata=metadata,
            read_only=True,
            idempotent=True,
            timeout=timeout,
        ),
    ]


def _short(text: str | None) -> str | None:
    return None if text is None else str(text)[:_MAX_DESCRIPTION]


__all__ = [
    "McpPrompt",
    "McpPromptArgument",
    "McpResource",
    "browsing_tools",
    "prompt_of",
    "resource_of",
]

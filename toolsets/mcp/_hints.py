"""A server tool's annotations (`ToolHints`) and which tools need approval (`ApprovalPolicy`).

The hints are the server's word: they may add caution, never remove it.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, TypeAlias

from ...core.errors import ChainConfigurationError
from ...core.tools import ToolDefinition

if TYPE_CHECKING:
    from mcp_types import Tool as McpTool

ApprovalPolicy: TypeAlias = (
    bool | Literal["destructive"] | Collection[str] | Callable[[ToolDefinition], bool]
)
"""Which tools need approval: all (`True`), none (`False`), those the server marks
`destructiveHint: true` (`"destructive"`, the default), server tool names, or a predicate."""


@dataclass(frozen=True, slots=True)
class ToolHints:
    """A server tool's annotations, each `True` only when the server says exactly `true`."""

    read_only: bool = False
    destructive: bool = False
    idempotent: bool = False
    open_world: bool = False
    task_required: bool = False


def tool_hints(info: McpTool) -> ToolHints:
    """The annotations of a server tool (`readOnlyHint`, `destructiveHint`,
    `idempotentHint`, `openWorldHint`) and whether it requires MCP tasks.

    A hint that is absent or not exactly `true` is `False` (the MCP default of
    `destructiveHint` is true, but almost no server sets it: pass `requires_approval=True`
    for servers you do not trust). Hints may add caution, never remove it: a tool that
    says both `readOnlyHint: true` and `destructiveHint: true` is destructive, not
    read-only.
    """
    annotations = getattr(info, "annotations", None)
    execution = getattr(info, "execution", None)
    task_required = getattr(execution, "task_support", None) == "required"
    if annotations is None:
        return ToolHints(task_required=task_required)
    destructive = getattr(annotations, "destructive_hint", None) is True
    return ToolHints(
        read_only=not destructive and getattr(annotations, "read_only_hint", None) is True,
        destructive=destructive,
        idempotent=getattr(annotations, "idempotent_hint", None) is True,
        open_world=getattr(annotations, "open_world_hint", None) is True,
        task_required=task_required,
    )


def tool_effects(info: McpTool) -> tuple[bool, bool]:
    """`(read_only, idempotent)` from a server tool's annotations (see `tool_hints`)."""
    hints = tool_hints(info)
    return hints.read_only, hints.idempotent


def check_policy(policy: ApprovalPolicy) -> None:
    """Raise `ChainConfigurationError` for a string policy other than `"destructive"`."""
    if isinstance(policy, str) and policy != "destructive":
        raise ChainConfigurationError(
            "requires_approval takes True, False, 'destructive', a collection of tool "
            "names or a predicate"
        )


def needs_approval(policy: ApprovalPolicy, definition: ToolDefinition, hints: ToolHints) -> bool:
    """Whether `policy` makes the server tool `definition` (unprefixed) need approval."""
    if isinstance(policy, bool):
        return policy
    if policy == "destructive":
        return hints.destructive
    if callable(policy):
        return bool(policy(definition))
    if isinstance(policy, str):
        raise ChainConfigurationError("requires_approval takes a collection of tool names")
    return definition.name in policy


def trusted_effects(policy: ApprovalPolicy, needed: bool, hints: ToolHints) -> tuple[bool, bool]:
    """`(read_only, idempotent)` the tool may declare: the server's hints, unless the app
    (not the server's `destructiveHint`) imposed the approval. That approval is not the
    server's to lift: its hints would let the call be approved without asking, served
    from a cache, retried or fallen back over."""
    trusted = not needed or policy == "destructive"
    return trusted and hints.read_only, trusted and hints.idempotent


__all__ = [
    "ApprovalPolicy",
    "ToolHints",
    "check_policy",
    "needs_approval",
    "tool_effects",
    "tool_hints",
    "trusted_effects",
]

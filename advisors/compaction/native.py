"""Provider-native context management, asked for through `CompactionAdvisor(native=...)`.

The advisor sets `ChatOptions.native_compaction` (a typed option: a provider's name to
what it sends) on each request; a provider that has such a feature reads its own entry
and turns it into its request field, and no provider reads another's, so a fallback to
another provider never sends a field it does not know:

- OpenAI Responses: `context_management=[{"type": "compaction", "compact_threshold": N}]`.
  The `compaction` output item the server returns is kept in the assistant message's
  `provider_data["openai-responses"]` and sent back to that provider only.
- Anthropic: `context_management={"edits": [...]}` with `clear_tool_uses_20250919`
  (tool-result clearing) and/or `compact_20260112` (server-side summary), and the beta
  header they need. The `compaction` block of the answer is kept in
  `provider_data["anthropic"]` and sent back to Anthropic only.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from ...core.errors import ChainConfigurationError
from ...core.request import ChatRequest


@dataclass(frozen=True, slots=True)
class NativeCompaction:
    """What to ask each provider for.

    - `openai_compact_threshold`: OpenAI Responses compacts server-side once the rendered
      input reaches this many tokens.
    - `anthropic_clear_tool_uses`: Anthropic clears old tool results once the input
      reaches this many tokens, keeping the last `anthropic_keep_tool_uses`, clearing at
      least `anthropic_clear_at_least` tokens (so the cached prefix is not broken for
      little), never for the tools named in `anthropic_exclude_tools`.
    - `anthropic_compact_trigger`: Anthropic summarizes server-side once the input
      reaches this many tokens (at least 50,000), with `anthropic_compact_instructions`
      (if given) in place of its own summarizing prompt.
    """

    openai_compact_threshold: int | None = None
    anthropic_clear_tool_uses: int | None = None
    anthropic_keep_tool_uses: int = 3
    anthropic_clear_at_least: int | None = None
    anthropic_exclude_tools: Collection[str] = ("search_tools",)
    anthropic_compact_trigger: int | None = None
    anthropic_compact_instructions: str | None = None

    def __post_init__(self) -> None:
        if self.anthropic_compact_trigger is not None and self.anthropic_compact_trigger < 50_000:
            raise ChainConfigurationError("anthropic_compact_trigger must be at least 50000")
        for name in ("openai_compact_threshold", "anthropic_clear_tool_uses"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ChainConfigurationError(f"{name} must be at least 1")
        if isinstance(self.anthropic_exclude_tools, str):
            raise ChainConfigurationError("anthropic_exclude_tools takes tool names")
        if self.anthropic_compact_instructions is not None and (
            self.anthropic_compact_trigger is None or not self.anthropic_compact_instructions
        ):
            raise ChainConfigurationError(
                "anthropic_compact_instructions needs anthropic_compact_trigger and some text"
            )

    def mark(self) -> dict[str, Any]:
        """What is put in `ChatOptions.native_compaction`, by provider name."""
        mark: dict[str, Any] = {}
        if self.openai_compact_threshold is not None:
            mark["openai-responses"] = [
                {"type": "compaction", "compact_threshold": self.openai_compact_threshold}
            ]
        edits: list[dict[str, Any]] = []
        if self.anthropic_clear_tool_uses is not None:
            edit: dict[str, Any] = {
                "type": "clear_tool_uses_20250919",
                "trigger": {"type": "input_tokens", "value": self.anthropic_clear_tool_uses},
                "keep": {"type": "tool_uses", "value": self.anthropic_keep_tool_uses},
            }
            if self.anthropic_clear_at_least is not None:
                edit["clear_at_least"] = {
                    "type": "input_tokens",
                    "value": self.anthropic_clear_at_least,
                }
            if self.anthropic_exclude_tools:
                edit["exclude_tools"] = list(self.anthropic_exclude_tools)
            edits.append(edit)
        if self.anthropic_compact_trigger is not None:
            compact: dict[str, Any] = {
                "type": "compact_20260112",
                "trigger": {"type": "input_tokens", "value": self.anthropic_compact_trigger},
            }
            if self.anthropic_compact_instructions is not None:
                compact["instructions"] = self.anthropic_compact_instructions
            edits.append(compact)
        if edits:
            mark["anthropic"] = {"edits": edits}
        return mark

    def apply(self, request: ChatRequest) -> ChatRequest:
        """`request` with the mark as its options' `native_compaction`."""
        mark = self.mark()
        if not mark:
            return request
        return request.with_options(native_compaction=mark)


__all__ = ["NativeCompaction"]

"""The mark by which `CompactionAdvisor(native=...)` asks a provider for its own context
management, and how a provider takes it out of a request body.

The mark is `ChatOptions.extra[NATIVE_COMPACTION_KEY]`: a mapping from a provider's name
to what that provider should send (`"anthropic"`: the `context_management` object;
`"openai-responses"`: the `context_management` list). Every provider removes the mark
from its body (`take_native`), so a model fallback to another provider never sends it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

NATIVE_COMPACTION_KEY = "advisorchain_compaction"
"""The key of the mark in `ChatOptions.extra`."""

ANTHROPIC_BETAS = "context-management-2025-06-27,compact-2026-01-12"
"""The `anthropic-beta` header value context editing and compaction need."""


def take_native(body: dict[str, Any], provider: str) -> Any:
    """Remove the mark from a request `body`; `provider`'s part of it, or `None`."""
    mark = body.pop(NATIVE_COMPACTION_KEY, None)
    if not isinstance(mark, Mapping):
        return None
    return mark.get(provider)


def asks(extra: Mapping[str, Any], provider: str) -> bool:
    """Whether request options' `extra` asks `provider` for native compaction."""
    mark = extra.get(NATIVE_COMPACTION_KEY)
    return isinstance(mark, Mapping) and mark.get(provider) is not None


__all__ = ["ANTHROPIC_BETAS", "NATIVE_COMPACTION_KEY", "asks", "take_native"]

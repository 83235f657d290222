"""How a provider reads `CompactionAdvisor(native=...)`'s request for its own context
management: `ChatOptions.native_compaction` maps a provider's name to what that provider
should send (`"anthropic"`: the `context_management` object; `"openai-responses"`: the
`context_management` list). A provider reads its own entry only, so a model fallback to
another provider never sends it.
"""

from __future__ import annotations

from typing import Any

from ..core.options import ChatOptions

ANTHROPIC_BETAS = "context-management-2025-06-27,compact-2026-01-12"
"""The `anthropic-beta` header value context editing and compaction need."""


def native_compaction(options: ChatOptions, provider: str) -> Any:
    """What `options` ask `provider` to send for native compaction, or `None`."""
    asked = options.native_compaction
    return None if asked is None else asked.get(provider)


__all__ = ["ANTHROPIC_BETAS", "native_compaction"]

"""Prompt caching for Anthropic's Messages API: where `cache_control` breakpoints go.

Anthropic caches a request's prefix up to each block marked with `cache_control` (at most
four marks per request); a later request that starts with the same prefix reads it from
the cache, billed at a tenth of the input price, and each write costs a quarter more than
plain input. `PromptCache` places the marks on what stays the same from one call to the
next, in the order the API reads a request (tools, then system, then messages):

1. the last tool definition: the tool list;
2. the last system block: the instructions;
3. the last block of the history before the latest user turn: stable from now on (the
   previous turn's mark 4 lies inside it, so the API reads up to there and writes the
   rest);
4. the last block of the request itself, so the next round of a tool loop, or the next
   turn, reads all of this one.

Marks are never put on `thinking` or `redacted_thinking` blocks (the API refuses them),
nor on empty text: the nearest earlier block of the same message takes the mark. Prefixes
shorter than the model's minimum (1,024 tokens for most models) are not cached, and cost
nothing extra: the API ignores those marks.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

_UNMARKABLE = frozenset({"thinking", "redacted_thinking"})
MAX_BREAKPOINTS = 4
"""The API's limit of `cache_control` marks per request."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PromptCache:
    """Which breakpoints `AnthropicChatModel` places (see the module's notes); `ttl` is the
    cache lifetime asked for (`None`: the API's default, five minutes)."""

    tools: bool = True
    system: bool = True
    history: bool = True
    request: bool = True
    ttl: Literal["5m", "1h"] | None = None

    def marker(self) -> dict[str, str]:
        """The `cache_control` value placed."""
        return {"type": "ephemeral", "ttl": self.ttl} if self.ttl else {"type": "ephemeral"}


def place_breakpoints(body: dict[str, Any], plan: PromptCache) -> dict[str, Any]:
    """`body` (changed in place) with `cache_control` marks where `plan` says; blocks
    that carry a mark already count against the API's limit of four, and no mark is
    added beyond it."""
    marks: list[dict[str, Any]] = []
    tools = body.get("tools")
    if plan.tools and isinstance(tools, list):
        # a deferred tool (tool search) is not part of the cached prefix: mark the last
        # tool that is loaded
        loaded = [t for t in tools if isinstance(t, dict) and not t.get("defer_loading")]
        if loaded:
            marks.append(loaded[-1])
    if plan.system and body.get("system"):
        system = body["system"]
        if isinstance(system, str):
            system = body["system"] = [{"type": "text", "text": system}]
        block = _markable(system)
        if block is not None:
            marks.append(block)
    messages = body.get("messages") or []
    if plan.history:
        turn = _last_user_turn(messages)
        if turn is not None and turn > 0:
            block = _last_markable(messages[turn - 1])
            if block is not None:
                marks.append(block)
    if plan.request and messages:
        block = _last_markable(messages[-1])
        if block is not None:
            marks.append(block)
    room = MAX_BREAKPOINTS - _count_marks(body)
    for block in marks:
        if room <= 0:
            break
        if "cache_control" not in block:
            block["cache_control"] = plan.marker()
            room -= 1
    return body


def _last_user_turn(messages: list[Any]) -> int | None:
    """The index of the last user message that is not only tool results."""
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if not isinstance(message, Mapping) or message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, str) or any(
            isinstance(b, Mapping) and b.get("type") != "tool_result" for b in content or ()
        ):
            return index
    return None


def _last_markable(message: Any) -> dict[str, Any] | None:
    if not isinstance(message, dict):
        return None
    content = message.get("content")
    if isinstance(content, str):
        if not content:
            return None
        content = message["content"] = [{"type": "text", "text": content}]
    return _markable(content) if isinstance(content, list) else None


def _markable(blocks: list[Any]) -> dict[str, Any] | None:
    for block in reversed(blocks):
        if not isinstance(block, dict) or block.get("type") in _UNMARKABLE:
            continue
        if block.get("type") == "text" and not block.get("text"):
            continue
        return block
    return None


def _count_marks(body: Mapping[str, Any]) -> int:
    count = 0
    for key in ("tools", "system"):
        value = body.get(key)
        if isinstance(value, list):
            count += sum(isinstance(b, Mapping) and "cache_control" in b for b in value)
    for message in body.get("messages") or ():
        content = message.get("content") if isinstance(message, Mapping) else None
        if isinstance(content, list):
            count += sum(isinstance(b, Mapping) and "cache_control" in b for b in content)
    return count


__all__ = ["MAX_BREAKPOINTS", "PromptCache", "place_breakpoints"]

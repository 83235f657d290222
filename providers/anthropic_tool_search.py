"""Provider-native tool search on Anthropic's wire: the catalog is sent deferred and the
API searches it.

`ToolSearchAdvisor(native="bm25")` (or `"regex"`) does not narrow the tool list: it sends
every tool and sets `ChatOptions.native_tool_search` (`NativeToolSearch`: the variant and
the tools to defer). `anthropic_tool_search(body, search)` writes that in Anthropic's wire
form (the Messages API's tool search tool): the search tool
`{"type": "tool_search_tool_bm25_20251119", "name": "tool_search_tool_bm25"}` first,
`"defer_loading": true` on every deferred tool. The API then loads only the tools its
search finds, and the tool list, sent whole and in the same order on every request, never
changes the request's prefix.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..core.options import NativeToolSearch

__all__ = ["ANTHROPIC_SEARCH_TOOLS", "anthropic_tool_search"]

ANTHROPIC_SEARCH_TOOLS: Mapping[str, dict[str, str]] = {
    "bm25": {"type": "tool_search_tool_bm25_20251119", "name": "tool_search_tool_bm25"},
    "regex": {"type": "tool_search_tool_regex_20251119", "name": "tool_search_tool_regex"},
}


def anthropic_tool_search(body: dict[str, Any], search: NativeToolSearch) -> dict[str, Any]:
    """A Messages API body with `search` applied, in place: the search tool of its variant
    first in `tools`, `"defer_loading": true` on the tools it defers."""
    deferred = set(search.deferred)
    tools = [
        {**tool, "defer_loading": True} if tool.get("name") in deferred else tool
        for tool in body.get("tools", [])
    ]
    body["tools"] = [dict(ANTHROPIC_SEARCH_TOOLS[search.variant]), *tools]
    return body


__all__ = [
    "ANTHROPIC_SEARCH_TOOLS",
    "anthropic_tool_search",
]

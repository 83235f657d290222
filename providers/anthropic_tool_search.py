"""Provider-native tool search: the catalog is sent deferred and the provider searches it.

`ToolSearchAdvisor(native="bm25")` (or `"regex"`) does not narrow the tool list: it
sends every tool and marks the request with `NATIVE_KEY` in `ChatOptions.extra`: which
search variant to use and which tools to defer. `anthropic_tool_search(body)` turns that
mark into Anthropic's wire form (the Messages API's tool search tool): the search tool
`{"type": "tool_search_tool_bm25_20251119", "name": "tool_search_tool_bm25"}` first,
`"defer_loading": true` on every deferred tool. The API then loads only the tools its
search finds, and the tool list, sent whole and in the same order on every request,
never changes the request's prefix. Only the Anthropic provider understands the mark;
other providers would send it as an unknown body field (and the API refuses it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal, TypeAlias

NativeSearch: TypeAlias = Literal["bm25", "regex"]
"""The provider's search variants: natural-language (BM25) or Python regex queries."""

NATIVE_KEY = "advisorchain_tool_search"
"""The `ChatOptions.extra` key of the mark: `{"variant": ..., "deferred": [names]}`."""

ANTHROPIC_SEARCH_TOOLS: Mapping[str, dict[str, str]] = {
    "bm25": {"type": "tool_search_tool_bm25_20251119", "name": "tool_search_tool_bm25"},
    "regex": {"type": "tool_search_tool_regex_20251119", "name": "tool_search_tool_regex"},
}


def native_mark(variant: NativeSearch, deferred: Sequence[str]) -> dict[str, Any]:
    """The `extra` entry a request carries for the provider's search."""
    return {NATIVE_KEY: {"variant": variant, "deferred": list(deferred)}}


def anthropic_tool_search(body: dict[str, Any]) -> dict[str, Any]:
    """A Messages API body with the advisor's mark (if any) applied, in place.

    Removes `NATIVE_KEY` from the body; when it held a mark, puts the search tool of its
    variant first in `tools` and sets `"defer_loading": true` on the tools it names. A
    body without the mark is returned unchanged. A malformed mark raises `ValueError`
    (it can only come from code, never from the model).
    """
    mark = body.pop(NATIVE_KEY, None)
    if mark is None:
        return body
    if not isinstance(mark, Mapping) or mark.get("variant") not in ANTHROPIC_SEARCH_TOOLS:
        raise ValueError(f"{NATIVE_KEY} must be {{'variant': 'bm25' | 'regex', 'deferred': [...]}}")
    deferred = set(mark.get("deferred") or ())
    tools = [
        {**tool, "defer_loading": True} if tool.get("name") in deferred else tool
        for tool in body.get("tools", [])
    ]
    body["tools"] = [dict(ANTHROPIC_SEARCH_TOOLS[mark["variant"]]), *tools]
    return body


__all__ = [
    "ANTHROPIC_SEARCH_TOOLS",
    "NATIVE_KEY",
    "NativeSearch",
    "anthropic_tool_search",
    "native_mark",
]

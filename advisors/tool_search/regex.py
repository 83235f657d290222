"""`RegexIndex`: tools whose name or description match a regular expression."""

from __future__ import annotations

import re
from collections.abc import Sequence

from ...core.tools import ToolDefinition
from .index import ToolIndex, document_text

MAX_PATTERN_CHARS = 200
"""Longer patterns are searched as literal text (a bound on the cost of a model's regex)."""


class RegexIndex:
    """Finds tools whose name or indexed text match the query as a regular expression.

    For models that search better with patterns (`get_.*_weather`, `(?i)slack`). Matching
    is case-insensitive. A query that is not a valid pattern, or is longer than
    `MAX_PATTERN_CHARS`, is searched as literal text; an empty query finds nothing.
    Tools whose name matches come first, then those whose description or parameters
    match, each in catalog order.
    """

    def __init__(self) -> None:
        self._entries: tuple[tuple[str, str], ...] = ()

    def __repr__(self) -> str:
        return f"RegexIndex(tools={len(self._entries)})"

    async def build(self, definitions: Sequence[ToolDefinition]) -> ToolIndex:
        """A new regex index over `definitions`."""
        built = RegexIndex()
        built._entries = tuple((d.name, document_text(d)) for d in definitions)
        return built

    async def search(self, query: str, k: int) -> list[str]:
        """Up to `k` names matching `query`, name matches first."""
        pattern = compile_query(query)
        if pattern is None or k < 1:
            return []
        by_name = [name for name, _ in self._entries if pattern.search(name)]
        if len(by_name) >= k:
            return by_name[:k]
        named = set(by_name)
        by_text = [n for n, text in self._entries if n not in named and pattern.search(text)]
        return (by_name + by_text)[:k]


def compile_query(query: str) -> re.Pattern[str] | None:
    """The pattern for `query`: as a regex if valid and short, else as literal text."""
    text = query.strip()
    if not text:
        return None
    if len(text) <= MAX_PATTERN_CHARS:
        try:
            return re.compile(text, re.IGNORECASE)
        except (re.error, OverflowError, RecursionError):
            pass
    return re.compile(re.escape(text[: MAX_PATTERN_CHARS * 10]), re.IGNORECASE)

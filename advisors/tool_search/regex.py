"""`RegexIndex`: tools whose name or description match a regular expression."""

from __future__ import annotations

import re
import re._constants as sre  # type: ignore[import-not-found]  # no stubs; stable since 3.11
import re._parser as sre_parse  # type: ignore[import-not-found]
import time
from collections.abc import Sequence
from typing import Any

import anyio.lowlevel

from ...core.tools import ToolDefinition
from .index import QueryRejected, ToolIndex, document_text

MAX_PATTERN_CHARS = 200
"""Longer patterns are searched as literal text (a bound on the cost of a model's regex)."""

MAX_TEXT_CHARS = 8000
"""A pattern reads at most this many characters of each tool's name and text."""

WIDE_TEXT_CHARS = 1000
"""A pattern with a quantifier that may repeat many times (`.*`, `\\w+`, `{0,99}`) reads at
most this many characters of each text: its cost grows with the text."""

MAX_SEARCH_SECONDS = 1.0
"""A search that runs longer stops and is rejected (checked after each tool)."""

_BUDGET = 2_500_000
"""The most backtracking steps per text an accepted pattern may cost in the worst case
(some 50 ms of the event loop's time)."""

_REPEATS = (sre.MAX_REPEAT, sre.MIN_REPEAT, sre.POSSESSIVE_REPEAT)
_UNSUPPORTED = {
    sre.GROUPREF: "backreferences",
    sre.GROUPREF_EXISTS: "conditional groups",
    sre.ASSERT: "lookarounds",
    sre.ASSERT_NOT: "lookarounds",
}
_ADVICE = (
    "Use a simpler pattern: plain words, alternatives like `mail|slack`, or at most one "
    "`.*` (e.g. `get_.*_weather`)."
)


class RegexIndex:
    """Finds tools whose name or indexed text match the query as a regular expression.

    For models that search better with patterns (`get_.*_weather`, `(?i)slack`). Matching
    is case-insensitive. A query that is not a valid pattern, or is longer than
    `MAX_PATTERN_CHARS`, is searched as literal text; an empty query finds nothing.
    Tools whose name matches come first, then those whose description or parameters
    match, each in catalog order.

    Python's regex engine backtracks and cannot be interrupted, and a model's pattern
    must not stall the event loop, so the cost is bounded before anything is matched:
    `search` raises `QueryRejected` (the model reads it, with advice) for
    backreferences, lookarounds, conditional groups, a quantifier over a group that
    holds another quantifier or an alternation (`(a+)+`, `(a|b)*`), and patterns whose
    worst case exceeds a fixed budget (in effect, one unbounded quantifier such as `.*`
    at most). A pattern reads the first `MAX_TEXT_CHARS` of each text, or only
    `WIDE_TEXT_CHARS` if it has a quantifier whose cost grows with the text. The search
    yields to the event loop as it goes and stops with `QueryRejected` after
    `MAX_SEARCH_SECONDS`.
    """

    def __init__(self) -> None:
        self._entries: tuple[tuple[str, str], ...] = ()

    def __repr__(self) -> str:
        return f"RegexIndex(tools={len(self._entries)})"

    async def build(self, definitions: Sequence[ToolDefinition]) -> ToolIndex:
        """A new regex index over `definitions`."""
        built = RegexIndex()
        built._entries = tuple(
            (d.name[:MAX_TEXT_CHARS], document_text(d)[:MAX_TEXT_CHARS]) for d in definitions
        )
        return built

    async def search(self, query: str, k: int) -> list[str]:
        """Up to `k` names matching `query`, name matches first.

        Raises `QueryRejected` for a pattern that could take too long (see the class).
        """
        pattern = compile_query(query)
        if pattern is None or k < 1:
            return []
        limit = text_limit(pattern.pattern)
        by_name: list[str] = []
        by_text: list[str] = []
        yielded = time.monotonic()
        deadline = yielded + MAX_SEARCH_SECONDS
        for name, text in self._entries:
            if pattern.search(name[:limit]):
                by_name.append(name)
                if len(by_name) >= k:
                    break
            elif len(by_text) < k and pattern.search(text[:limit]):
                by_text.append(name)
            now = time.monotonic()
            if now > deadline:
                raise QueryRejected(f"The pattern took too long to match. {_ADVICE}")
            if now - yielded > 0.005:
                await anyio.lowlevel.checkpoint()
                yielded = time.monotonic()
        return (by_name + by_text)[:k]


def compile_query(query: str) -> re.Pattern[str] | None:
    """The pattern for `query`: as a regex if valid and short, else as literal text.

    Raises `QueryRejected` for a valid pattern that `text_limit` refuses.
    """
    text = query.strip()
    if not text:
        return None
    if len(text) <= MAX_PATTERN_CHARS:
        try:
            pattern = re.compile(text, re.IGNORECASE)
        except (re.error, OverflowError, RecursionError):
            pass
        else:
            text_limit(text)
            return pattern
    return re.compile(re.escape(text[: MAX_PATTERN_CHARS * 10]), re.IGNORECASE)


def text_limit(pattern: str) -> int:
    """How many characters of each text the valid `pattern` may read within the budget.

    Raises `QueryRejected` for backreferences, lookarounds and conditional groups; for a
    quantifier that may repeat a group holding another quantifier or an alternation
    (the exponential cases); and when even `WIDE_TEXT_CHARS` would exceed the budget
    (quantifiers in sequence multiply their ranges).
    """
    items = list(sre_parse.parse(pattern, re.IGNORECASE))
    for limit in (MAX_TEXT_CHARS, WIDE_TEXT_CHARS):
        if limit * _cost(items, limit) <= _BUDGET:  # the pattern is tried at every position
            return limit
    raise QueryRejected(
        f"The pattern {pattern!r} could take too long to match: it repeats too much. " + _ADVICE
    )


def _cost(items: list[tuple[Any, Any]], chars: int) -> int:
    """An upper bound of the ways `items` can match at one position of a text of `chars`
    characters, capped just above the budget."""
    cost = 1
    for op, value in items:
        if op in _UNSUPPORTED:
            raise QueryRejected(f"{_UNSUPPORTED[op].capitalize()} are not supported. {_ADVICE}")
        if op in _REPEATS:
            low, high, body = value
            if high > 1 and _varies(list(body)):
                raise QueryRejected(
                    "A quantifier may not apply to a group that holds another quantifier "
                    f"or `|` (as in `(a+)+` or `(a|b)*`). {_ADVICE}"
                )
            span = min(high, chars) - min(low, chars)
            cost *= (span + 1) * _cost(list(body), chars)
        elif op is sre.SUBPATTERN:
            cost *= _cost(list(value[3]), chars)
        elif op is sre.ATOMIC_GROUP:
            cost *= _cost(list(value), chars)
        elif op is sre.BRANCH:
            cost *= sum(_cost(list(branch), chars) for branch in value[1])
        cost = min(cost, _BUDGET + 1)
    return cost


def _varies(items: list[tuple[Any, Any]]) -> bool:
    """Whether `items` can match in more than one way (a variable quantifier or a `|`)."""
    for op, value in items:
        if op is sre.BRANCH:
            return True
        if op in _REPEATS:
            low, high, body = value
            if low != high or _varies(list(body)):
                return True
        elif op is sre.SUBPATTERN and _varies(list(value[3])):
            return True
        elif op is sre.ATOMIC_GROUP and _varies(list(value)):
            return True
    return False


__all__ = [
    "MAX_PATTERN_CHARS",
    "MAX_SEARCH_SECONDS",
    "MAX_TEXT_CHARS",
    "WIDE_TEXT_CHARS",
    "RegexIndex",
    "compile_query",
    "text_limit",
]

"""Table names and prefixes: plain SQL identifiers, checked before they reach a query."""

from __future__ import annotations

import re

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
MAX_IDENTIFIER = 63
"""PostgreSQL's limit (longer names are silently cut); SQLite has none, so both use it."""
MAX_PREFIX = 41
"""A prefix leaves room for the longest table name a store adds to it."""


def is_identifier(name: str, *, max_length: int = MAX_IDENTIFIER) -> bool:
    """Whether `name` is letters, digits and `_`, not starting with a digit, and short enough."""
    return len(name) <= max_length and _IDENTIFIER.fullmatch(name) is not None


def check_table_name(name: str, error: type[Exception] = ValueError) -> str:
    """`name`, or `error` saying what a table name may hold."""
    if not is_identifier(name):
        raise error(
            f"invalid table name {name!r}: use letters, digits and '_' (at most "
            f"{MAX_IDENTIFIER}, not starting with a digit)"
        )
    return name


def check_table_prefix(prefix: str, error: type[Exception] = ValueError) -> str:
    """`prefix`, or `error` saying what a table prefix may hold."""
    if not is_identifier(prefix, max_length=MAX_PREFIX):
        raise error(
            f"invalid table prefix {prefix!r}: use letters, digits and '_' (at most "
            f"{MAX_PREFIX}, not starting with a digit)"
        )
    return prefix


__all__ = [
    "MAX_IDENTIFIER",
    "MAX_PREFIX",
    "check_table_name",
    "check_table_prefix",
    "is_identifier",
]
